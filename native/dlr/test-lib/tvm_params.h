// Reads TVM's parameter files (`relay.save_param_dict` / `*.params`): an NDArray list with
// names, as TVM's runtime writes it (little-endian). Only the parts the conformance models
// need are kept; every length is checked against the file before it is used.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln_conformance {

struct ParamArray {
  // DLPack type: code (0 int, 1 uint, 2 float, 4 bfloat), bits, lanes.
  uint8_t code = 0;
  uint8_t bits = 0;
  uint16_t lanes = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// Throws std::runtime_error describing what is wrong with the file.
std::map<std::string, ParamArray> ReadTvmParams(const std::string& path);

}  // namespace kiln_conformance
