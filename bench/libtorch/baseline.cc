// The C++ baseline: the same LibTorch running the same TorchScript module in a plain loop,
// with the settings Kiln uses (intra-op threads, inference mode, graph optimizer on).
//
//   kiln_libtorch_baseline MODEL.pt THREADS BATCH
// Loads the module, prints "ready", then for each line "N" on stdin runs N forwards and
// prints one JSON line {"ms": [per-forward milliseconds...]}; an empty line or EOF ends it.
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL THREADS BATCH\n", argv[0]);
    return 2;
  }
  at::set_num_threads(std::stoi(argv[2]));
  torch::jit::Module module = torch::jit::load(argv[1]);
  module.eval();
  std::vector<c10::IValue> inputs{torch::rand({std::stoll(argv[3]), 3, 224, 224})};
  c10::InferenceMode guard;
  std::printf("ready\n");
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line) && !line.empty()) {
    const int count = std::stoi(line);
    std::printf("{\"ms\": [");
    for (int i = 0; i < count; ++i) {
      const auto start = std::chrono::steady_clock::now();
      module.forward(inputs);
      const auto end = std::chrono::steady_clock::now();
      std::printf(i ? ", %.4f" : "%.4f", std::chrono::duration<double, std::milli>(end - start).count());
    }
    std::printf("]}\n");
    std::fflush(stdout);
  }
  return 0;
}
