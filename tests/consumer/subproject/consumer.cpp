// A program outside looptrace that uses its installed headers and library: the summary
// of the bundled example and the stream must agree on how many accesses there are.
//   consumer SPEC.yaml... (N_EINSUMS=2, M=8, KN=4)
#include <cstdio>
#include <string>
#include <vector>

#include <looptrace/sinks/summary_json.hpp>
#include <looptrace/stream.hpp>
#include <looptrace/closed_form/summary.hpp>

int main(int argc, char** argv) {
  const std::vector<std::string> files(argv + 1, argv + argc);
  const looptrace::Schedule schedule = looptrace::compile_schedule(looptrace::load_spec(
      files, {{"N_EINSUMS", std::int64_t(2)}, {"M", std::int64_t(8)}, {"KN", std::int64_t(4)}}));
  const looptrace::TraceSummary summary = looptrace::summarize(schedule);
  std::int64_t counted = 0, streamed = 0;
  for (const auto& t : summary.traces) counted += t.n_accesses;
  looptrace::AccessStream stream(schedule);
  for (auto batch = stream.next_batch(); !batch.empty(); batch = stream.next_batch())
    streamed += std::int64_t(batch.size());
  const auto json = looptrace::summary_json(summary, schedule);
  std::printf("%lld timesteps, %lld accesses streamed, %lld counted, %zu summary keys\n",
              static_cast<long long>(schedule.n_timesteps), static_cast<long long>(streamed),
              static_cast<long long>(counted), json.size());
  return streamed == counted && streamed > 0 ? 0 : 1;
}
