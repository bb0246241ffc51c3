"""What the scripts that compile against BUILD share: the sanitizer flags its library
was built with."""
import json
import subprocess


def sanitizer_flags(build):
    """-fsanitize=... when BUILD was configured with b_sanitize: a program that links an
    instrumented library needs the sanitizer runtimes too."""
    p = subprocess.run(["meson", "introspect", build, "--buildoptions"], capture_output=True, text=True)
    try:
        options = {o["name"]: o["value"] for o in json.loads(p.stdout)}
    except ValueError:
        return []
    value = options.get("b_sanitize", "none")
    return [] if value in ("none", "", None) else ["-fsanitize=" + value]
