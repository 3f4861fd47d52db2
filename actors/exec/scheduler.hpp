#pragma once
// The scheduler settings every Runnel actor system uses (work stealing, tuned polling), for
// programs that make an actor system of their own beside a runtime's (benchmarks of the substrate).
namespace caf {
class actor_system_config;
}

namespace runnel {

void configure_scheduler(caf::actor_system_config& cfg, int threads);

} // namespace runnel
