"""`looptrace movement --convention timeloop` against Timeloop's own published reference
outputs in timeloop-accelergy-exercises: the tutorial exercises (conv1d at one to three
levels, with and without bypass, a 16-PE fanout over C or over K, the mapper's three
conv1d mappings; the mapper's Eyeriss mapping of a VGG layer on 14 x 12 PEs) and the
example designs (simple weight- and output-stationary, Eyeriss-like, Simba-like, on a
stride-2 convolution), converted to LoopTree mappings in tests/specs/timeloop/ (each
mapping names its map.txt). Every figure the
convention reports is checked against the reference stats:

- instances  = "Utilized instances (max)"
- max_tile   = "Utilized capacity" (one instance's largest tile)
- fills      = "Scalar fills (per-instance)" x utilized instances
- reads      = "Scalar reads (per-instance)" x utilized instances
- updates    = "Scalar updates (per-instance)" x utilized instances

CASES gives, per (level, tensor), each expected number with the line of the stats file
(under the exercises repository, the path given per case) it comes from. Also: the
per-instance figures of the default report, the refusals, and the Python binding.
Run: python3 tests/cli/test_timeloop_convention.py build/src/looptrace
"""
import json
import os
import subprocess
import sys

from harness import EXE, ROOT, check, main, run, write

SPECS = os.path.join(ROOT, "tests", "specs", "timeloop")

# (mapping, workload, stats file, {(level, tensor): {figure: (per-instance value, line)}})
CASES = [
    ('00_1level', 'conv1d', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/00-model-conv1d-1level/ref-output/timeloop-model.stats.txt', {
        ('Buffer', 'Weights'): {'max_tile': (3, 59), 'instances': (1, 60), 'reads': (48, 62), 'fills': (0, 63), 'updates': (0, 64)},
        ('Buffer', 'Inputs'): {'max_tile': (18, 83), 'instances': (1, 84), 'reads': (48, 86), 'fills': (0, 87), 'updates': (0, 88)},
        ('Buffer', 'Outputs'): {'max_tile': (16, 107), 'instances': (1, 108), 'reads': (32, 110), 'fills': (0, 111), 'updates': (48, 112)},
    }),
    ('01_2level_os', 'conv1d', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/01-model-conv1d-2level/ref-output/os/timeloop-model.stats.txt', {
        ('Buffer', 'Weights'): {'max_tile': (3, 58), 'instances': (1, 59), 'reads': (48, 61), 'fills': (3, 62), 'updates': (0, 63)},
        ('Buffer', 'Inputs'): {'max_tile': (3, 82), 'instances': (1, 83), 'reads': (48, 85), 'fills': (18, 86), 'updates': (0, 87)},
        ('Buffer', 'Outputs'): {'max_tile': (1, 106), 'instances': (1, 107), 'reads': (32, 109), 'fills': (0, 110), 'updates': (48, 111)},
        ('MainMemory', 'Weights'): {'max_tile': (3, 166), 'instances': (1, 167), 'reads': (3, 169), 'fills': (0, 170), 'updates': (0, 171)},
        ('MainMemory', 'Inputs'): {'max_tile': (18, 190), 'instances': (1, 191), 'reads': (18, 193), 'fills': (0, 194), 'updates': (0, 195)},
        ('MainMemory', 'Outputs'): {'max_tile': (16, 214), 'instances': (1, 215), 'reads': (0, 217), 'fills': (0, 218), 'updates': (16, 219)},
    }),
    ('01_2level_ws', 'conv1d', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/01-model-conv1d-2level/ref-output/ws/timeloop-model.stats.txt', {
        ('Buffer', 'Weights'): {'max_tile': (1, 58), 'instances': (1, 59), 'reads': (48, 61), 'fills': (3, 62), 'updates': (0, 63)},
        ('Buffer', 'Inputs'): {'max_tile': (16, 82), 'instances': (1, 83), 'reads': (48, 85), 'fills': (18, 86), 'updates': (0, 87)},
        ('Buffer', 'Outputs'): {'max_tile': (16, 106), 'instances': (1, 107), 'reads': (32, 109), 'fills': (0, 110), 'updates': (48, 111)},
        ('MainMemory', 'Weights'): {'max_tile': (3, 166), 'instances': (1, 167), 'reads': (3, 169), 'fills': (0, 170), 'updates': (0, 171)},
        ('MainMemory', 'Inputs'): {'max_tile': (18, 190), 'instances': (1, 191), 'reads': (18, 193), 'fills': (0, 194), 'updates': (0, 195)},
        ('MainMemory', 'Outputs'): {'max_tile': (16, 214), 'instances': (1, 215), 'reads': (0, 217), 'fills': (0, 218), 'updates': (16, 219)},
    }),
    ('02_2level_no_tiling', 'conv1d_oc', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/02-model-conv1d+oc-2level/ref-output/no-tiling/timeloop-model.stats.txt', {
        ('Buffer', 'Weights'): {'max_tile': (3, 58), 'instances': (1, 59), 'reads': (1536, 61), 'fills': (96, 62), 'updates': (0, 63)},
        ('Buffer', 'Inputs'): {'max_tile': (3, 82), 'instances': (1, 83), 'reads': (1536, 85), 'fills': (576, 86), 'updates': (0, 87)},
        ('Buffer', 'Outputs'): {'max_tile': (1, 106), 'instances': (1, 107), 'reads': (1024, 109), 'fills': (0, 110), 'updates': (1536, 111)},
        ('MainMemory', 'Weights'): {'max_tile': (96, 167), 'instances': (1, 168), 'reads': (96, 170), 'fills': (0, 171), 'updates': (0, 172)},
        ('MainMemory', 'Inputs'): {'max_tile': (18, 191), 'instances': (1, 192), 'reads': (576, 194), 'fills': (0, 195), 'updates': (0, 196)},
        ('MainMemory', 'Outputs'): {'max_tile': (512, 215), 'instances': (1, 216), 'reads': (0, 218), 'fills': (0, 219), 'updates': (512, 220)},
    }),
    ('02_2level_tiling', 'conv1d_oc', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/02-model-conv1d+oc-2level/ref-output/tiling/timeloop-model.stats.txt', {
        ('Buffer', 'Weights'): {'max_tile': (6, 59), 'instances': (1, 60), 'reads': (1536, 62), 'fills': (96, 63), 'updates': (0, 64)},
        ('Buffer', 'Inputs'): {'max_tile': (3, 83), 'instances': (1, 84), 'reads': (1536, 86), 'fills': (288, 87), 'updates': (0, 88)},
        ('Buffer', 'Outputs'): {'max_tile': (2, 107), 'instances': (1, 108), 'reads': (1024, 110), 'fills': (0, 111), 'updates': (1536, 112)},
        ('MainMemory', 'Weights'): {'max_tile': (96, 168), 'instances': (1, 169), 'reads': (96, 171), 'fills': (0, 172), 'updates': (0, 173)},
        ('MainMemory', 'Inputs'): {'max_tile': (18, 192), 'instances': (1, 193), 'reads': (288, 195), 'fills': (0, 196), 'updates': (0, 197)},
        ('MainMemory', 'Outputs'): {'max_tile': (512, 216), 'instances': (1, 217), 'reads': (0, 219), 'fills': (0, 220), 'updates': (512, 221)},
    }),
    ('03_3level_no_bypass', 'conv1d_oc', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/03-model-conv1d+oc-3level/ref-output/no-bypass/timeloop-model.stats.txt', {
        ('RegisterFile', 'Weights'): {'max_tile': (6, 59), 'instances': (1, 60), 'reads': (1536, 62), 'fills': (96, 63), 'updates': (0, 64)},
        ('RegisterFile', 'Inputs'): {'max_tile': (3, 83), 'instances': (1, 84), 'reads': (1536, 86), 'fills': (288, 87), 'updates': (0, 88)},
        ('RegisterFile', 'Outputs'): {'max_tile': (2, 107), 'instances': (1, 108), 'reads': (1024, 110), 'fills': (0, 111), 'updates': (1536, 112)},
        ('GlobalBuffer', 'Weights'): {'max_tile': (96, 168), 'instances': (1, 169), 'reads': (96, 171), 'fills': (96, 172), 'updates': (0, 173)},
        ('GlobalBuffer', 'Inputs'): {'max_tile': (18, 192), 'instances': (1, 193), 'reads': (288, 195), 'fills': (18, 196), 'updates': (0, 197)},
        ('GlobalBuffer', 'Outputs'): {'max_tile': (512, 216), 'instances': (1, 217), 'reads': (0, 219), 'fills': (0, 220), 'updates': (512, 221)},
        ('MainMemory', 'Weights'): {'max_tile': (96, 275), 'instances': (1, 276), 'reads': (96, 278), 'fills': (0, 279), 'updates': (0, 280)},
        ('MainMemory', 'Inputs'): {'max_tile': (18, 299), 'instances': (1, 300), 'reads': (18, 302), 'fills': (0, 303), 'updates': (0, 304)},
        ('MainMemory', 'Outputs'): {'max_tile': (512, 323), 'instances': (1, 324), 'reads': (0, 326), 'fills': (0, 327), 'updates': (512, 328)},
    }),
    ('03_3level_bypass', 'conv1d_oc', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/03-model-conv1d+oc-3level/ref-output/bypass/timeloop-model.stats.txt', {
        ('RegisterFile', 'Outputs'): {'max_tile': (2, 59), 'instances': (1, 60), 'reads': (1024, 62), 'fills': (0, 63), 'updates': (1536, 64)},
        ('GlobalBuffer', 'Weights'): {'max_tile': (96, 120), 'instances': (1, 121), 'reads': (1536, 123), 'fills': (96, 124), 'updates': (0, 125)},
        ('GlobalBuffer', 'Inputs'): {'max_tile': (18, 144), 'instances': (1, 145), 'reads': (1536, 147), 'fills': (18, 148), 'updates': (0, 149)},
        ('MainMemory', 'Weights'): {'max_tile': (96, 203), 'instances': (1, 204), 'reads': (96, 206), 'fills': (0, 207), 'updates': (0, 208)},
        ('MainMemory', 'Inputs'): {'max_tile': (18, 227), 'instances': (1, 228), 'reads': (18, 230), 'fills': (0, 231), 'updates': (0, 232)},
        ('MainMemory', 'Outputs'): {'max_tile': (512, 251), 'instances': (1, 252), 'reads': (0, 254), 'fills': (0, 255), 'updates': (512, 256)},
    }),
    ('04_3level_spatial_cp', 'conv1d_oc_ic', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/04-model-conv1d+oc-3levelspatial/ref-output/cp/timeloop-model.stats.txt', {
        ('RegisterFile', 'Weights'): {'max_tile': (1, 58), 'instances': (16, 59), 'reads': (3072, 61), 'fills': (192, 62), 'updates': (0, 63)},
        ('RegisterFile', 'Inputs'): {'max_tile': (16, 82), 'instances': (16, 83), 'reads': (3072, 85), 'fills': (1152, 86), 'updates': (0, 87)},
        ('RegisterFile', 'Outputs'): {'max_tile': (16, 106), 'instances': (16, 107), 'reads': (2560, 109), 'fills': (512, 110), 'updates': (3072, 111)},
        ('GlobalBuffer', 'Weights'): {'max_tile': (192, 168), 'instances': (16, 169), 'reads': (192, 171), 'fills': (192, 172), 'updates': (0, 173)},
        ('GlobalBuffer', 'Inputs'): {'max_tile': (36, 192), 'instances': (16, 193), 'reads': (1152, 195), 'fills': (36, 196), 'updates': (0, 197)},
        ('GlobalBuffer', 'Outputs'): {'max_tile': (512, 216), 'instances': (16, 217), 'reads': (512, 219), 'fills': (0, 220), 'updates': (1024, 221)},
        ('MainMemory', 'Weights'): {'max_tile': (3072, 275), 'instances': (1, 276), 'reads': (3072, 278), 'fills': (0, 279), 'updates': (0, 280)},
        ('MainMemory', 'Inputs'): {'max_tile': (576, 299), 'instances': (1, 300), 'reads': (576, 302), 'fills': (0, 303), 'updates': (0, 304)},
        ('MainMemory', 'Outputs'): {'max_tile': (512, 323), 'instances': (1, 324), 'reads': (0, 326), 'fills': (0, 327), 'updates': (512, 328)},
    }),
    ('04_3level_spatial_kp', 'conv1d_oc_ic', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/04-model-conv1d+oc-3levelspatial/ref-output/kp/timeloop-model.stats.txt', {
        ('RegisterFile', 'Weights'): {'max_tile': (1, 58), 'instances': (16, 59), 'reads': (3072, 61), 'fills': (192, 62), 'updates': (0, 63)},
        ('RegisterFile', 'Inputs'): {'max_tile': (16, 82), 'instances': (16, 83), 'reads': (3072, 85), 'fills': (1152, 86), 'updates': (0, 87)},
        ('RegisterFile', 'Outputs'): {'max_tile': (16, 106), 'instances': (16, 107), 'reads': (3040, 109), 'fills': (992, 110), 'updates': (3072, 111)},
        ('GlobalBuffer', 'Weights'): {'max_tile': (192, 168), 'instances': (16, 169), 'reads': (192, 171), 'fills': (192, 172), 'updates': (0, 173)},
        ('GlobalBuffer', 'Inputs'): {'max_tile': (576, 192), 'instances': (16, 193), 'reads': (1152, 195), 'fills': (576, 196), 'updates': (0, 197)},
        ('GlobalBuffer', 'Outputs'): {'max_tile': (32, 216), 'instances': (16, 217), 'reads': (992, 219), 'fills': (0, 220), 'updates': (1024, 221)},
        ('MainMemory', 'Weights'): {'max_tile': (3072, 275), 'instances': (1, 276), 'reads': (3072, 278), 'fills': (0, 279), 'updates': (0, 280)},
        ('MainMemory', 'Inputs'): {'max_tile': (576, 299), 'instances': (1, 300), 'reads': (576, 302), 'fills': (0, 303), 'updates': (0, 304)},
        ('MainMemory', 'Outputs'): {'max_tile': (512, 323), 'instances': (1, 324), 'reads': (0, 326), 'fills': (0, 327), 'updates': (512, 328)},
    }),
    ('05_mapper_baked', 'conv1d_oc', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/05-mapper-conv1d+oc-3level/ref-output/baked/timeloop-mapper.stats.txt', {
        ('RegisterFile', 'Weights'): {'max_tile': (6, 59), 'instances': (1, 60), 'reads': (1536, 62), 'fills': (96, 63), 'updates': (0, 64)},
        ('RegisterFile', 'Inputs'): {'max_tile': (3, 83), 'instances': (1, 84), 'reads': (1536, 86), 'fills': (288, 87), 'updates': (0, 88)},
        ('RegisterFile', 'Outputs'): {'max_tile': (2, 107), 'instances': (1, 108), 'reads': (1024, 110), 'fills': (0, 111), 'updates': (1536, 112)},
        ('GlobalBuffer', 'Weights'): {'max_tile': (96, 168), 'instances': (1, 169), 'reads': (96, 171), 'fills': (96, 172), 'updates': (0, 173)},
        ('GlobalBuffer', 'Inputs'): {'max_tile': (18, 192), 'instances': (1, 193), 'reads': (288, 195), 'fills': (18, 196), 'updates': (0, 197)},
        ('GlobalBuffer', 'Outputs'): {'max_tile': (512, 216), 'instances': (1, 217), 'reads': (0, 219), 'fills': (0, 220), 'updates': (512, 221)},
        ('MainMemory', 'Weights'): {'max_tile': (96, 275), 'instances': (1, 276), 'reads': (96, 278), 'fills': (0, 279), 'updates': (0, 280)},
        ('MainMemory', 'Inputs'): {'max_tile': (18, 299), 'instances': (1, 300), 'reads': (18, 302), 'fills': (0, 303), 'updates': (0, 304)},
        ('MainMemory', 'Outputs'): {'max_tile': (512, 323), 'instances': (1, 324), 'reads': (0, 326), 'fills': (0, 327), 'updates': (512, 328)},
    }),
    ('05_mapper_freebypass', 'conv1d_oc', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/05-mapper-conv1d+oc-3level/ref-output/freebypass/timeloop-mapper.stats.txt', {
        ('RegisterFile', 'Weights'): {'max_tile': (6, 59), 'instances': (1, 60), 'reads': (1536, 62), 'fills': (96, 63), 'updates': (0, 64)},
        ('RegisterFile', 'Inputs'): {'max_tile': (3, 83), 'instances': (1, 84), 'reads': (1536, 86), 'fills': (288, 87), 'updates': (0, 88)},
        ('RegisterFile', 'Outputs'): {'max_tile': (2, 107), 'instances': (1, 108), 'reads': (1024, 110), 'fills': (0, 111), 'updates': (1536, 112)},
        ('GlobalBuffer', 'Inputs'): {'max_tile': (18, 168), 'instances': (1, 169), 'reads': (288, 171), 'fills': (18, 172), 'updates': (0, 173)},
        ('MainMemory', 'Weights'): {'max_tile': (96, 227), 'instances': (1, 228), 'reads': (96, 230), 'fills': (0, 231), 'updates': (0, 232)},
        ('MainMemory', 'Inputs'): {'max_tile': (18, 251), 'instances': (1, 252), 'reads': (18, 254), 'fills': (0, 255), 'updates': (0, 256)},
        ('MainMemory', 'Outputs'): {'max_tile': (512, 275), 'instances': (1, 276), 'reads': (0, 278), 'fills': (0, 279), 'updates': (512, 280)},
    }),
    ('05_mapper_null', 'conv1d_oc', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/05-mapper-conv1d+oc-3level/ref-output/null/timeloop-mapper.stats.txt', {
        ('MainMemory', 'Weights'): {'max_tile': (96, 130), 'instances': (1, 131), 'reads': (1536, 133), 'fills': (0, 134), 'updates': (0, 135)},
        ('MainMemory', 'Inputs'): {'max_tile': (18, 154), 'instances': (1, 155), 'reads': (1536, 157), 'fills': (0, 158), 'updates': (0, 159)},
        ('MainMemory', 'Outputs'): {'max_tile': (512, 178), 'instances': (1, 179), 'reads': (1024, 181), 'fills': (0, 182), 'updates': (1536, 183)},
    }),
    ('06_eyeriss_vgg02_layer5', 'vgg02_layer5', 'workspace/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/06-mapper-convlayer-eyeriss/ref-output/timeloop-mapper.stats.txt', {
        ('psum_spad', 'Outputs'): {'max_tile': (8, 58), 'instances': (168, 59), 'reads': (5490688, 61), 'fills': (215040, 62), 'updates': (5505024, 63)},
        ('weights_spad', 'Weights'): {'max_tile': (192, 119), 'instances': (168, 120), 'reads': (5505024, 122), 'fills': (688128, 123), 'updates': (0, 124)},
        ('ifmap_spad', 'Inputs'): {'max_tile': (24, 178), 'instances': (168, 179), 'reads': (5505024, 181), 'fills': (286720, 182), 'updates': (0, 183)},
        ('shared_glb', 'Inputs'): {'max_tile': (5120, 240), 'instances': (1, 241), 'reads': (12042240, 243), 'fills': (573440, 244), 'updates': (0, 245)},
        ('shared_glb', 'Outputs'): {'max_tile': (7168, 264), 'instances': (1, 265), 'reads': (12042240, 267), 'fills': (2408448, 268), 'updates': (12845056, 269)},
        ('DRAM', 'Weights'): {'max_tile': (294912, 327), 'instances': (1, 328), 'reads': (8257536, 330), 'fills': (0, 331), 'updates': (0, 332)},
        ('DRAM', 'Inputs'): {'max_tile': (430592, 351), 'instances': (1, 352), 'reads': (573440, 354), 'fills': (0, 355), 'updates': (0, 356)},
        ('DRAM', 'Outputs'): {'max_tile': (802816, 375), 'instances': (1, 376), 'reads': (2408448, 378), 'fills': (0, 379), 'updates': (3211264, 380)},
    }),
    ('07_simple_weight_stationary', 'example_designs', 'workspace/example_designs/example_designs/simple_weight_stationary/ref_outputs/default_problem/timeloop-mapper.stats.txt', {
        ('output_activation_reg', 'Outputs'): {'max_tile': (1, 57), 'instances': (12, 58), 'reads': (802816, 60), 'fills': (802816, 61), 'updates': (903168, 62)},
        ('input_activation_reg', 'Inputs'): {'max_tile': (1, 116), 'instances': (12, 117), 'reads': (903168, 119), 'fills': (903168, 120), 'updates': (0, 121)},
        ('weight_reg', 'Weights'): {'max_tile': (1, 177), 'instances': (12, 178), 'reads': (903168, 180), 'fills': (2016, 181), 'updates': (0, 182)},
        ('pe_spad', 'Weights'): {'max_tile': (3, 239), 'instances': (12, 240), 'reads': (2016, 242), 'fills': (2016, 243), 'updates': (0, 244)},
        ('shared_glb', 'Weights'): {'max_tile': (864, 301), 'instances': (1, 302), 'reads': (24192, 304), 'fills': (864, 305), 'updates': (0, 306)},
        ('shared_glb', 'Inputs'): {'max_tile': (11475, 325), 'instances': (1, 326), 'reads': (2709504, 328), 'fills': (151875, 329), 'updates': (0, 330)},
        ('shared_glb', 'Outputs'): {'max_tile': (28672, 349), 'instances': (1, 350), 'reads': (3211264, 352), 'fills': (0, 353), 'updates': (3612672, 354)},
        ('DRAM', 'Weights'): {'max_tile': (864, 409), 'instances': (1, 410), 'reads': (864, 412), 'fills': (0, 413), 'updates': (0, 414)},
        ('DRAM', 'Inputs'): {'max_tile': (151875, 433), 'instances': (1, 434), 'reads': (151875, 436), 'fills': (0, 437), 'updates': (0, 438)},
        ('DRAM', 'Outputs'): {'max_tile': (401408, 457), 'instances': (1, 458), 'reads': (0, 460), 'fills': (0, 461), 'updates': (401408, 462)},
    }),
    ('07_simple_output_stationary', 'example_designs', 'workspace/example_designs/example_designs/simple_output_stationary/ref_outputs/default_problem/timeloop-mapper.stats.txt', {
        ('output_activation_reg', 'Outputs'): {'max_tile': (1, 57), 'instances': (16, 58), 'reads': (652288, 60), 'fills': (652288, 61), 'updates': (677376, 62)},
        ('input_activation_reg', 'Inputs'): {'max_tile': (1, 116), 'instances': (16, 117), 'reads': (677376, 119), 'fills': (677376, 120), 'updates': (0, 121)},
        ('weight_reg', 'Weights'): {'max_tile': (1, 176), 'instances': (16, 177), 'reads': (677376, 179), 'fills': (48384, 180), 'updates': (0, 181)},
        ('pe_spad', 'Outputs'): {'max_tile': (56, 238), 'instances': (16, 239), 'reads': (652288, 241), 'fills': (0, 242), 'updates': (677376, 243)},
        ('shared_glb', 'Weights'): {'max_tile': (432, 299), 'instances': (1, 300), 'reads': (774144, 302), 'fills': (13824, 303), 'updates': (0, 304)},
        ('shared_glb', 'Inputs'): {'max_tile': (9831, 323), 'instances': (1, 324), 'reads': (677376, 326), 'fills': (157296, 327), 'updates': (0, 328)},
        ('DRAM', 'Weights'): {'max_tile': (864, 385), 'instances': (1, 386), 'reads': (13824, 388), 'fills': (0, 389), 'updates': (0, 390)},
        ('DRAM', 'Inputs'): {'max_tile': (151875, 409), 'instances': (1, 410), 'reads': (157296, 412), 'fills': (0, 413), 'updates': (0, 414)},
        ('DRAM', 'Outputs'): {'max_tile': (401408, 433), 'instances': (1, 434), 'reads': (0, 436), 'fills': (0, 437), 'updates': (401408, 438)},
    }),
    ('07_eyeriss_like', 'example_designs', 'workspace/example_designs/example_designs/eyeriss_like/ref_outputs/default_problem/timeloop-mapper.stats.txt', {
        ('psum_spad', 'Outputs'): {'max_tile': (8, 58), 'instances': (126, 59), 'reads': (57344, 61), 'fills': (0, 62), 'updates': (86016, 63)},
        ('weights_spad', 'Weights'): {'max_tile': (24, 118), 'instances': (126, 119), 'reads': (86016, 121), 'fills': (1536, 122), 'updates': (0, 123)},
        ('ifmap_spad', 'Inputs'): {'max_tile': (3, 177), 'instances': (126, 178), 'reads': (86016, 180), 'fills': (10752, 181), 'updates': (0, 182)},
        ('shared_glb', 'Inputs'): {'max_tile': (9831, 238), 'instances': (1, 239), 'reads': (1354752, 241), 'fills': (157296, 242), 'updates': (0, 243)},
        ('shared_glb', 'Outputs'): {'max_tile': (6272, 262), 'instances': (1, 263), 'reads': (0, 265), 'fills': (0, 266), 'updates': (401408, 267)},
        ('DRAM', 'Weights'): {'max_tile': (864, 324), 'instances': (1, 325), 'reads': (13824, 327), 'fills': (0, 328), 'updates': (0, 329)},
        ('DRAM', 'Inputs'): {'max_tile': (151875, 348), 'instances': (1, 349), 'reads': (157296, 351), 'fills': (0, 352), 'updates': (0, 353)},
        ('DRAM', 'Outputs'): {'max_tile': (401408, 372), 'instances': (1, 373), 'reads': (0, 375), 'fills': (0, 376), 'updates': (401408, 377)},
    }),
    ('07_simba_like', 'example_designs', 'workspace/example_designs/example_designs/simba_like/ref_outputs/default_problem/timeloop-mapper.stats.txt', {
        ('PEWeightRegs', 'Weights'): {'max_tile': (1, 57), 'instances': (48, 58), 'reads': (225792, 60), 'fills': (32256, 61), 'updates': (0, 62)},
        ('PEAccuBuffer', 'Outputs'): {'max_tile': (14, 118), 'instances': (48, 119), 'reads': (200704, 121), 'fills': (50176, 122), 'updates': (225792, 123)},
        ('PEWeightBuffer', 'Weights'): {'max_tile': (18, 180), 'instances': (48, 181), 'reads': (32256, 183), 'fills': (18, 184), 'updates': (0, 185)},
        ('PEInputBuffer', 'Inputs'): {'max_tile': (513, 240), 'instances': (12, 241), 'reads': (225792, 243), 'fills': (56700, 244), 'updates': (0, 245)},
        ('GlobalBuffer', 'Inputs'): {'max_tile': (6075, 300), 'instances': (1, 301), 'reads': (170100, 303), 'fills': (151875, 304), 'updates': (0, 305)},
        ('GlobalBuffer', 'Outputs'): {'max_tile': (14336, 324), 'instances': (1, 325), 'reads': (802816, 327), 'fills': (0, 328), 'updates': (1204224, 329)},
        ('DRAM', 'Weights'): {'max_tile': (864, 384), 'instances': (1, 385), 'reads': (864, 387), 'fills': (0, 388), 'updates': (0, 389)},
        ('DRAM', 'Inputs'): {'max_tile': (151875, 408), 'instances': (1, 409), 'reads': (151875, 411), 'fills': (0, 412), 'updates': (0, 413)},
        ('DRAM', 'Outputs'): {'max_tile': (401408, 432), 'instances': (1, 433), 'reads': (0, 435), 'fills': (0, 436), 'updates': (401408, 437)},
    }),
]


PER_INSTANCE_FIGURES = ("fills", "reads", "updates")  # per instance in the stats: times the instances


def movement(mapping, workload, *extra):
    r = run("movement", os.path.join(SPECS, workload + ".workload.yaml"),
            os.path.join(SPECS, mapping + ".mapping.yaml"), *extra)
    return r


def entries(report):
    return {(l["level"], t["tensor"]): t for l in report["levels"] for t in l["tensors"]}


def test_reference_figures():
    checked = 0
    for mapping, workload, stats, expected in CASES:
        r = movement(mapping, workload, "--convention", "timeloop")
        check(r.returncode == 0, "%s: exit %d: %s" % (mapping, r.returncode, r.stderr))
        if r.returncode != 0:
            continue
        report = json.loads(r.stdout)
        check(report.get("convention") == "timeloop", mapping + ": convention")
        got = entries(report)
        check(set(got) == set(expected), "%s: entries %s, expected %s" % (mapping, sorted(got), sorted(expected)))
        for key, figures in expected.items():
            t = got.get(key)
            instances = figures["instances"][0]
            for figure, (value, line) in figures.items():
                want = value * instances if figure in PER_INSTANCE_FIGURES else value
                have = None if t is None else t.get(figure)
                checked += 1
                check(have == want, "%s %s %s: %s, expected %s (%s line %d)" % (mapping, key, figure, have, want,
                                                                                stats, line))
    check(checked == sum(len(f) for _, _, _, e in CASES for f in e.values()), "every figure checked")
    print("reference figures checked: %d" % checked)


def test_parent_figures():
    """parent_reads / parent_updates of a level: its parent's "Scalar reads" / "Scalar
    updates" times the parent's instances (in these cases every parent has one child
    per tensor and computes nothing itself). The stats list levels innermost first, so
    a tensor's parent is the next level after it in CASES that holds it; the home's are 0."""
    checked = 0
    for mapping, workload, stats, expected in CASES:
        r = movement(mapping, workload, "--convention", "timeloop")
        if r.returncode != 0:
            check(False, mapping + ": exit %d" % r.returncode)
            continue
        got = entries(json.loads(r.stdout))
        keys = list(expected)
        for i, key in enumerate(keys):
            parent = next((k for k in keys[i + 1:] if k[1] == key[1]), None)
            for figure, of in (("parent_reads", "reads"), ("parent_updates", "updates")):
                if parent is None:
                    want, line = 0, None
                else:
                    value, line = expected[parent][of]
                    want = value * expected[parent]["instances"][0]
                have = got.get(key, {}).get(figure)
                checked += 1
                check(have == want, "%s %s %s: %s, expected %s (%s line %s)" % (mapping, key, figure, have, want,
                                                                                stats, line))
    print("parent figures checked: %d" % checked)


def test_text_table():
    r = movement("04_3level_spatial_kp", "conv1d_oc_ic", "--convention", "timeloop", "--format", "text")
    check(r.returncode == 0, "text: exit %d: %s" % (r.returncode, r.stderr))
    check("Timeloop's convention" in r.stdout, "text: names the convention")
    # RegisterFile Outputs: 16 instances, utilized capacity 16, fills 992 x 16, reads 3040 x 16, updates 3072 x 16;
    row = [l.split() for l in r.stdout.splitlines() if l.startswith("RegisterFile") and " Outputs " in l]
    # Its parent reads (GlobalBuffer, 992 x 16) and updates (1024 x 16) for it.
    check(row == [["RegisterFile", "Outputs", "16", "16", "15872", "48640", "49152", "15872", "16384"]],
          "text: a row: %r" % row)


def test_per_instance_default():
    """The default (LoopTree) report: per instance beside the union, below !Spatial loops."""
    r = movement("04_3level_spatial_cp", "conv1d_oc_ic")
    check(r.returncode == 0, "default: exit %d: %s" % (r.returncode, r.stderr))
    got = entries(json.loads(r.stdout))
    # GlobalBuffer: one window per instance of its C-chunk (2 of 32 C), 16 instances.
    expected = {
        ("GlobalBuffer", "Weights"): (16, 192, 16 * 192),
        ("GlobalBuffer", "Inputs"): (16, 36, 16 * 36),
        ("GlobalBuffer", "Outputs"): (16, 512, 0),  # written only: never filled
        # RegisterFile: 2 x 32 x 3 windows per instance, each refetching its tile.
        ("RegisterFile", "Weights"): (16, 1, 16 * 192 * 1),
        ("RegisterFile", "Inputs"): (16, 16, 16 * 192 * 16),
        ("RegisterFile", "Outputs"): (16, 16, 0),
    }
    for key, (instances, tile, fills) in expected.items():
        t = got.get(key, {})
        have = (t.get("instances"), t.get("max_tile_per_instance"), t.get("fills_per_instance"))
        check(have == (instances, tile, fills), "default %s: %r, expected %r" % (key, have, (instances, tile, fills)))
    # The union figures stay: the 16 GlobalBuffers together hold all 576 inputs at once.
    check(got[("GlobalBuffer", "Inputs")]["max_tile"] == 576, "default: union max_tile")
    check("instances" not in got[("MainMemory", "Inputs")], "default: no per-instance figures above !Spatial")
    # A multicast (kp: the 16 GlobalBuffers, one per K pair, all hold the 576 inputs):
    # once in the union's fills, once per instance in fills_per_instance.
    kp = entries(json.loads(movement("04_3level_spatial_kp", "conv1d_oc_ic").stdout))[("GlobalBuffer", "Inputs")]
    have = (kp["max_tile"], kp["fills"], kp["instances"], kp["max_tile_per_instance"], kp["fills_per_instance"])
    check(have == (576, 576, 16, 576, 16 * 576), "default kp multicast: %r" % (have,))
    t = movement("04_3level_spatial_cp", "conv1d_oc_ic", "--format", "text")
    check("GlobalBuffer Inputs: 16 instances, max tile 36, fills 576" in t.stdout, "default text: per instance line")
    # Without !Spatial loops the report is as before: no per-instance keys, no extra line.
    plain = movement("01_2level_os", "conv1d", "--format", "text")
    check("per instance" not in plain.stdout, "default text: nothing per instance without !Spatial")


def test_python_argument():
    """A convention the binding does not know is a ValueError, as method's is."""
    code = ("import looptrace\ntry:\n    looptrace.movement(None, convention='tl')\nexcept ValueError as e:\n"
            "    print('ValueError', e)\n")
    build = os.path.dirname(os.path.dirname(os.path.abspath(EXE)))
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        p = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env) if os.path.exists(python) else None
        if p is not None and p.returncode == 0:
            check("ValueError convention is 'looptree' or 'timeloop'" in p.stdout, "python: bad convention: " + p.stdout)
            return
    print("(python module not built: skipped)")


def brute_per_instance(extents, accesses, loops, above):
    """Per-instance figures by brute force: every combination of the digits of the loops
    above the node (temporal and spatial), each a window of one instance; its tile, per
    rank variable the range the fixed loops leave (the loops inside cover it), projected
    per access (unit coefficients: a box). Returns {tensor: (max_tile, fills)}."""
    import itertools

    def count_of(j):  # a loop's iterations: from the largest tile it is given
        var, _, tile, initial = loops[j]
        given = extents[var]
        for k in range(j):
            if loops[k][0] == var:
                given = max(loops[k][2], loops[k][3])
        return 1 if given <= initial else 1 + -(-(given - initial) // tile)

    counts = [count_of(j) for j in range(above)]
    instances = 1
    for j in range(above):
        instances *= counts[j] if loops[j][1] else 1
    out = {"instances": instances}
    for digits in itertools.product(*[range(c) for c in counts]):
        ranges = {v: (0, e) for v, e in extents.items()}
        for j, d in enumerate(digits):
            var, _, tile, initial = loops[j]
            lo, hi = ranges[var]
            a = lo if d == 0 else lo + initial + (d - 1) * tile
            b = lo + initial if d == 0 else lo + initial + d * tile
            ranges[var] = (min(a, hi), min(b, hi))
        empty = any(hi <= lo for lo, hi in ranges.values())
        for name, projection, output in accesses:
            size = 0
            if not empty:
                size = 1
                for terms in projection:
                    size *= sum(ranges[v][1] - ranges[v][0] for v in terms) - len(terms) + 1
            tile, fills = out.get(name, (0, 0))
            out[name] = (max(tile, size), fills + (0 if output else size))
    return out


def random_loops(rng, extents, count, p_spatial, p_initial):
    """`count` random loops over the variables of `extents`, outermost first, each
    (variable, spatial, tile, first tile): a loop tiles what the last loop of its
    variable above gave (the larger of its tile and first tile; else the extent), and
    with probability `p_initial` its first tile is drawn apart from its tile. With
    probability `p_spatial` it is !Spatial."""
    loops = []
    for _ in range(count):
        var = rng.choice(list(extents))
        given = extents[var]
        for l in loops:
            if l[0] == var:
                given = max(l[2], l[3])
        tile = rng.randint(1, max(1, given))
        initial = tile if rng.random() < 1 - p_initial else rng.randint(1, max(1, given))
        loops.append((var, rng.random() < p_spatial, tile, initial))
    return loops


def test_per_instance_brute_force():
    """The default report's per-instance figures against brute force on random nests
    (imperfect tiles, first tiles of their own, spatial loops between temporal ones)."""
    import random
    rng = random.Random(27)
    accesses = [("A", [["m"], ["k"]], False), ("B", [["k", "r"]], False), ("Z", [["m"]], True)]
    for case in range(40):
        extents = {v: rng.randint(1, 7) for v in "mkr"}
        loops = random_loops(rng, extents, rng.randint(2, 5), p_spatial=0.4, p_initial=0.3)
        if not any(l[1] for l in loops):
            loops[rng.randrange(len(loops))] = loops[0][:1] + (True,) + loops[0][2:]
        above = rng.randint(1, len(loops))
        if not any(l[1] for l in loops[:above]):
            j = rng.randrange(above)
            loops[j] = (loops[j][0], True, loops[j][2], loops[j][3])
        def node(l):
            kind = "Spatial" if l[1] else "Temporal"
            extra = ", name: X" if l[1] else ""
            first = ", initial_tile_shape: %d" % l[3] if l[3] != l[2] else ""
            return "  - !%s {rank_variable: %s, tile_shape: %d%s%s}\n" % (kind, l[0], l[2], first, extra)
        text = ("workload:\n  iteration_space_shape:\n" +
                "".join("    %s: 0 <= %s < %d\n" % (v, v, e) for v, e in extents.items()) +
                "  einsums:\n  - name: E\n    tensor_accesses:\n"
                "    - {name: A, projection: [m, k]}\n    - {name: B, projection: {J: k + r}}\n"
                "    - {name: Z, projection: [m], output: True}\n"
                "mapping:\n  nodes:\n  - !Storage {component: Main, tensors: [A, B, Z]}\n" +
                "".join(node(l) for l in loops[:above]) +
                "  - !Storage {component: Buffer, tensors: [A, B, Z]}\n" +
                "".join(node(l) for l in loops[above:]) + "  - !Compute {einsum: E}\n")
        path = write("random%d.yaml" % case, text)
        r = run("movement", path)
        if r.returncode != 0:
            check(False, "random %d: exit %d: %s\n%s" % (case, r.returncode, r.stderr, text))
            continue
        got = entries(json.loads(r.stdout))
        want = brute_per_instance(extents, accesses, loops, above)
        instances = want.pop("instances")
        for name, (tile, fills) in want.items():
            t = got.get(("Buffer", name), {})
            if instances == 1:  # the spatial loops run once: nothing per instance
                check("instances" not in t, "random %d %s: per instance with one instance" % (case, name))
                continue
            have = (t.get("instances"), t.get("max_tile_per_instance"), t.get("fills_per_instance"))
            check(have == (instances, tile, fills),
                  "random %d %s: %r, expected %r\n%s" % (case, name, have, (instances, tile, fills), text))


def test_refusals():
    r = movement("01_2level_os", "conv1d", "--convention", "timeloop", "--method", "enumerate")
    check(r.returncode == 2 and "closed form" in r.stderr, "enumerate refused: %d %s" % (r.returncode, r.stderr))
    r = movement("01_2level_os", "conv1d", "--convention", "timeloop", "--from", "3", "--to", "9")
    check(r.returncode == 2 and "whole run" in r.stderr, "selection refused: %d %s" % (r.returncode, r.stderr))
    files = [os.path.join(SPECS, "conv1d.workload.yaml"), os.path.join(SPECS, "01_2level_os.mapping.yaml")]
    for extra, says in ((["--method", "enumerate"], "closed form"), (["--from", "3", "--to", "9"], "whole run"),
                        (["--max-timesteps", "9"], "whole run"), (["--shard", "0/2"], "whole run")):
        r = run("transfers", *files, "--level", "MainMemory", "--convention", "timeloop", *extra)
        check(r.returncode == 2 and says in r.stderr and r.stdout == "",
              "transfers %s refused: %d %s" % (extra, r.returncode, r.stderr))


def transfer_counts(mapping, workload, level, *extra):
    """Requests of `transfers --convention timeloop --level LEVEL` (one element a line),
    per (child level, tensor): [reads, writes]; and the requests themselves."""
    r = run("transfers", os.path.join(SPECS, workload + ".workload.yaml"), os.path.join(SPECS, mapping + ".mapping.yaml"),
            "--level", level, "--convention", "timeloop", "--line-bytes", "1", *extra, timeout=300)
    check(r.returncode == 0, "transfers %s %s: exit %d: %s" % (mapping, level, r.returncode, r.stderr))
    requests = [json.loads(line) for line in r.stdout.splitlines()]
    counts = {}
    for q in requests:
        c = counts.setdefault((q["child"], q["tensor"]), [0, 0])
        c[q["op"] == "write"] += 1
    return counts, requests


def ordered(requests):
    """Time order; at one timestep writes before reads, then addresses ascending."""
    keys = [(q["t"], q["op"] != "write", q["address"]) for q in requests]
    return all(a <= b for a, b in zip(keys, keys[1:]))


def streamed_counts(mapping, workload, level, tensor):
    """(reads, writes) of `transfers --convention timeloop --level LEVEL --tensors TENSOR`
    (one element a line), counted as Ramulator 2's lines stream by (LD / ST: 'T' is in
    no address)."""
    p = subprocess.Popen([EXE, "transfers", os.path.join(SPECS, workload + ".workload.yaml"),
                          os.path.join(SPECS, mapping + ".mapping.yaml"), "--level", level, "--tensors", tensor,
                          "--convention", "timeloop", "--line-bytes", "1", "--format", "ramulator2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = writes = 0
    for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
        lines += chunk.count(b"\n")
        writes += chunk.count(b"T")
    err = p.stderr.read().decode(errors="replace")
    check(p.wait() == 0, "transfers %s %s %s: %s" % (mapping, level, tensor, err))
    return [lines - writes, writes]


def test_transfer_counts():
    """The invariant of `transfers --convention timeloop`: on every spec of
    tests/specs/timeloop, the requests of a level P for its child level L and a tensor
    (one element a line) number L's parent_reads (reads) and parent_updates (writes) of
    `movement --convention timeloop`, and so P's reads and updates in Timeloop's stats
    (test_parent_figures). Each tensor's parent is the next level out that holds it (the
    stats list levels innermost first); in these specs a level is the parent of one
    child level per tensor, so a (level, tensor)'s requests are that child's."""
    checked = 0
    for mapping, workload, stats, expected in CASES:
        r = movement(mapping, workload, "--convention", "timeloop")
        if r.returncode != 0:
            check(False, mapping + ": movement exit %d" % r.returncode)
            continue
        got = entries(json.loads(r.stdout))
        keys = list(expected)
        children = {}
        for i, key in enumerate(keys):
            parent = next((k for k in keys[i + 1:] if k[1] == key[1]), None)
            if parent is not None:
                children.setdefault(parent, []).append(key)
        for (level, tensor) in keys:
            kids = children.get((level, tensor), [])
            check(len(kids) <= 1, "%s %s %s: one child level" % (mapping, level, tensor))
            want = [0, 0]
            for kid in kids:
                want = [got[kid]["parent_reads"], got[kid]["parent_updates"]]
            have = streamed_counts(mapping, workload, level, tensor)
            checked += 1
            check(have == want, "%s %s -> %s: requests (reads, writes) %s, movement's parent reads and updates %s"
                  % (mapping, (level, tensor), kids, have, want))
    print("transfer counts checked: %d (level, tensor) pairs" % checked)


def test_transfer_order():
    """The requests in the contract's order (time; at one timestep writes first, then
    addresses ascending), attributed to the child levels the specs give, on the specs
    whose traces are small enough to read as JSON."""
    for mapping, workload, _, expected in CASES:
        if not mapping.startswith(tuple("0%d" % i for i in range(6))):
            continue
        levels = list(dict.fromkeys(level for level, _ in expected))
        for level in levels:
            counts, requests = transfer_counts(mapping, workload, level)
            check(ordered(requests), "%s %s: requests out of order" % (mapping, level))
            for child, tensor in counts:
                check((child, tensor) in expected and levels.index(child) < levels.index(level),
                      "%s %s: a request for %s %s" % (mapping, level, child, tensor))


def test_transfer_conv1d_requests():
    """Hand-worked: conv1d (Inputs[p + r], p < 16, r < 3), MainMemory above a p loop of
    16, Buffer (Weights, Inputs, Outputs) above the r loop of 3: Buffer's windows are
    [3p, 3p + 3). Weights' tile [0, 3) stays put: read once at 0. Inputs' tile [p, p + 3)
    slides by one: [0, 3) at 0, then the one new element p + 2 at 3p. Outputs' tile {p}
    changes every window: each is updated when the next window's tile replaces it (at
    3p + 3), never read back. Addresses: Weights at 0, Inputs at 4096, Outputs at 8192."""
    _, requests = transfer_counts("01_2level_os", "conv1d", "MainMemory")
    want = [(0, "read", a, "Weights") for a in range(3)] + [(0, "read", 4096 + a, "Inputs") for a in range(3)]
    for p in range(1, 16):
        want += [(3 * p, "write", 8192 + p - 1, "Outputs"), (3 * p, "read", 4096 + p + 2, "Inputs")]
    want.append((48, "write", 8192 + 15, "Outputs"))
    have = [(q["t"], q["op"], q["address"], q["tensor"]) for q in requests]
    check(have == want, "conv1d os: %s" % have)
    check(all(q["child"] == "Buffer" and q["level"] == "MainMemory" for q in requests), "conv1d os: child and level")
    # Weight-stationary (r outer, 3 windows [16r, 16r + 16) of Buffer): Weights' tile {r}
    # at 16r; Inputs' [r, r + 16): 16 at 0, then 16 + r - 1 at 16r; Outputs' tile [0, 16)
    # stays put over the three windows: updated once, at the end (48), never read back.
    _, requests = transfer_counts("01_2level_ws", "conv1d", "MainMemory")
    want = [(0, "read", 0, "Weights")] + [(0, "read", 4096 + a, "Inputs") for a in range(16)]
    for r in (1, 2):
        want += [(16 * r, "read", r, "Weights"), (16 * r, "read", 4096 + 15 + r, "Inputs")]
    want += [(48, "write", 8192 + a, "Outputs") for a in range(16)]
    have = [(q["t"], q["op"], q["address"], q["tensor"]) for q in requests]
    check(have == want, "conv1d ws: %s" % have)


def random_nest(rng):
    """A random nest of one Einsum (A[m, k], B[k + r] read, Z[m] written) under three
    levels (Main, Mid, Buf; Mid and Buf hold some of the tensors), with imperfect tiles,
    first tiles of their own and !Spatial loops anywhere."""
    extents = {v: rng.randint(1, 6) for v in "mkr"}
    loops = random_loops(rng, extents, rng.randint(2, 6), p_spatial=0.3, p_initial=0.2)
    cuts = sorted(rng.sample(range(len(loops) + 1), 2))

    def node(l):
        kind = "Spatial" if l[1] else "Temporal"
        extra = ", name: X" if l[1] else ""
        first = ", initial_tile_shape: %d" % l[3] if l[3] != l[2] else ""
        return "  - !%s {rank_variable: %s, tile_shape: %d%s%s}\n" % (kind, l[0], l[2], first, extra)

    def storage(name):
        held = [t for t in "ABZ" if rng.random() < 0.8]
        return "  - !Storage {component: %s, tensors: [%s]}\n" % (name, ", ".join(held)) if held else ""

    return ("workload:\n  iteration_space_shape:\n" +
            "".join("    %s: 0 <= %s < %d\n" % (v, v, e) for v, e in extents.items()) +
            "  einsums:\n  - name: E\n    tensor_accesses:\n"
            "    - {name: A, projection: [m, k]}\n    - {name: B, projection: {J: k + r}}\n"
            "    - {name: Z, projection: [m], output: True}\n"
            "mapping:\n  nodes:\n  - !Storage {component: Main, tensors: [A, B, Z]}\n" +
            "".join(node(l) for l in loops[:cuts[0]]) + storage("Mid") +
            "".join(node(l) for l in loops[cuts[0]:cuts[1]]) + storage("Buf") +
            "".join(node(l) for l in loops[cuts[1]:]) + "  - !Compute {einsum: E}\n")


def test_transfer_random():
    """The invariant on random nests: every level's requests per child level and tensor
    number movement's parent reads and updates, or the level is refused (exit 2, nothing
    written) where a window with an empty or shorter tile stands in Timeloop's count for
    an iteration with a whole one."""
    import random
    rng = random.Random(5)
    refused = 0
    for case in range(60):
        text = random_nest(rng)
        path = write("tl_random%d.yaml" % case, text)
        r = run("movement", path, "--convention", "timeloop")
        if r.returncode != 0:
            check(False, "random %d: movement exit %d: %s\n%s" % (case, r.returncode, r.stderr, text))
            continue
        report = json.loads(r.stdout)
        want = {(l["level"], t["tensor"]): [t["parent_reads"], t["parent_updates"]]
                for l in report["levels"] for t in l["tensors"] if not t["home"]}
        have, failed = {}, False
        for level in [l["level"] for l in report["levels"]]:
            q = run("transfers", path, "--level", level, "--convention", "timeloop", "--line-bytes", "1")
            if q.returncode != 0:
                check(q.returncode == 2 and "not supported" in q.stderr and q.stdout == "",
                      "random %d %s: exit %d: %s" % (case, level, q.returncode, q.stderr))
                failed = True
                continue
            for line in q.stdout.splitlines():
                x = json.loads(line)
                c = have.setdefault((x["child"], x["tensor"]), [0, 0])
                c[x["op"] == "write"] += 1
        if failed:
            refused += 1
            continue
        for key, w in want.items():
            check(have.get(key, [0, 0]) == w, "random %d %s: requests %s, movement %s\n%s"
                  % (case, key, have.get(key, [0, 0]), w, text))
    check(refused <= 3, "random: %d of 60 refused" % refused)
    # One refused: k split over 2 instances of 4 and 1, m tiles of 4 then 2 with an
    # inner m loop of 4: the window at the inner m's third iteration in the outer second
    # tile is empty, where Timeloop counts the second's delta for it.
    text = CONV_REFUSED
    r = run("transfers", write("tl_refused.yaml", text), "--level", "Mid", "--convention", "timeloop")
    check(r.returncode == 2 and "rank variable 'm' has 0 points" in r.stderr and "not supported" in r.stderr
          and r.stdout == "", "refused: %d %s" % (r.returncode, r.stderr))


CONV_REFUSED = """\
workload:
  iteration_space_shape:
    m: 0 <= m < 6
    k: 0 <= k < 5
    r: 0 <= r < 3
  einsums:
  - name: E
    tensor_accesses:
    - {name: A, projection: [m, k]}
    - {name: B, projection: {J: k + r}}
    - {name: Z, projection: [m], output: True}
mapping:
  nodes:
  - !Storage {component: Main, tensors: [A, B, Z]}
  - !Spatial {rank_variable: k, tile_shape: 4, name: X}
  - !Storage {component: Mid, tensors: [A, B, Z]}
  - !Temporal {rank_variable: m, tile_shape: 4}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Storage {component: Buf, tensors: [A, B, Z]}
  - !Compute {einsum: E}
"""


def test_transfer_read_backs():
    """Partial sums read back: 04_3level_spatial_kp, GlobalBuffer's Outputs for the
    RegisterFiles: 16 x 992 reads (each update but the first of an element in its
    GlobalBuffer instance is read back first) and 16 x 1024 updates, Timeloop's
    GlobalBuffer reads and updates; each read of an element comes after an update of it
    by the same child (before the window that reads it back)."""
    counts, requests = transfer_counts("04_3level_spatial_kp", "conv1d_oc_ic", "GlobalBuffer", "--tensors", "Outputs")
    check(counts.get(("RegisterFile", "Outputs")) == [992 * 16, 1024 * 16], "kp read-backs: %s" % counts)
    # (The 16 GlobalBuffers share the address space: an element's reads are at most its
    # writes so far, counted per address.)
    written, ok = {}, True
    for q in requests:
        if q["op"] == "write":
            written[q["address"]] = written.get(q["address"], 0) + 1
        else:
            ok = ok and written.get(q["address"], 0) > 0
    check(ok, "kp: a read-back before any update of its element")


def test_python():
    """movement(..., convention="timeloop") gives the CLI's figures, where the module is built."""
    build = os.path.dirname(os.path.dirname(os.path.abspath(EXE)))
    paths = [os.path.join(build, "python"), os.path.join(ROOT, "python")]
    code = ("import json, sys; import looptrace; "
            "print(json.dumps(looptrace.movement(looptrace.Spec.from_yaml(sys.argv[1], sys.argv[2]), "
            "convention='timeloop')))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]))
    files = [os.path.join(SPECS, "conv1d_oc_ic.workload.yaml"), os.path.join(SPECS, "04_3level_spatial_kp.mapping.yaml")]
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3"]):  # the one the module was built for
        if not os.path.exists(python):
            continue
        p = subprocess.run([python, "-c", code, *files], capture_output=True, text=True, env=env)
        if p.returncode == 0 or not ("No module named" in p.stderr or "_looptrace" in p.stderr):
            break
    else:
        p = None
    if p is None or (p.returncode != 0 and ("No module named" in p.stderr or "_looptrace" in p.stderr)):
        print("(python module not built: skipped)")
        return
    check(p.returncode == 0, "python: %s" % p.stderr[-500:])
    cli = movement("04_3level_spatial_kp", "conv1d_oc_ic", "--convention", "timeloop")
    check(p.returncode == 0 and json.loads(p.stdout) == json.loads(cli.stdout), "python: the CLI's report")
    # transfers(convention="timeloop"): the CLI's requests; a convention it does not know is a ValueError.
    code = ("import json, sys; import looptrace; spec = looptrace.Spec.from_yaml(sys.argv[1], sys.argv[2]); "
            "print(json.dumps(list(looptrace.transfers(spec, 'GlobalBuffer', line_bytes=1, "
            "convention='timeloop').records())))\n"
            "try:\n    looptrace.transfers(spec, 'GlobalBuffer', convention='tl')\n"
            "except ValueError as e:\n    print('ValueError', e)\n")
    q = subprocess.run([python, "-c", code, *files], capture_output=True, text=True, env=env)
    check(q.returncode == 0, "python transfers: %s" % q.stderr[-500:])
    _, requests = transfer_counts("04_3level_spatial_kp", "conv1d_oc_ic", "GlobalBuffer")
    lines = q.stdout.splitlines()
    check(len(lines) == 2 and json.loads(lines[0]) == requests, "python transfers: the CLI's requests")
    check(len(lines) == 2 and "convention is 'looptree' or 'timeloop'" in lines[1], "python transfers: bad convention")


if __name__ == "__main__":
    sys.exit(main([test_reference_figures, test_parent_figures, test_text_table, test_per_instance_default, test_per_instance_brute_force, test_refusals, test_python,
                   test_python_argument, test_transfer_counts, test_transfer_order, test_transfer_conv1d_requests, test_transfer_read_backs, test_transfer_random]))
