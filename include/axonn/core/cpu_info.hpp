// core/cpu_info.hpp — which processor this is, for what records the machine (calibrated profiles,
// the MFU peak's source).
#pragma once

#include <string>

namespace axonn {

// The processor's model name from /proc/cpuinfo (e.g. "AMD EPYC 9654 96-Core Processor"); empty where
// it is not known.
std::string cpu_model_name();

}  // namespace axonn
