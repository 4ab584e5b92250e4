#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace kiln::shared_file {

// One read-only mapping of a file, shared by every thread of the process that asks for the
// same key. Lives while any holder (a JavaScript ArrayBuffer over it) does.
struct Mapping {
  std::string key;
  void* data = nullptr;
  size_t size = 0;
  size_t holders = 0;
};

// Process-wide table of mappings by key. Thread-safe: worker threads share it on purpose,
// which is the point of this addon (one copy of a model's bytes per process).
class MappingRegistry {
 public:
  static MappingRegistry& Instance();

  // The mapping under `key`, one more holder counted; a new read-only private mapping of
  // `path` when none is alive. Throws a coded NativeError naming the failed system call.
  Mapping* Share(const std::string& key, const std::string& path);
  // The live mapping under `key` with one more holder counted, or nullptr.
  Mapping* Find(const std::string& key);
  // One holder fewer; the last one unmaps.
  void Release(Mapping* mapping);

  // Claims let one thread create the file that others will map. Claim(): "" when the caller
  // now holds the claim; "busy" while another thread holds it or the mapping is alive;
  // otherwise the failure an earlier holder reported. `owner` identifies the holder's thread.
  std::string Claim(const std::string& key, const void* owner);
  // Gives a claim back; a non-empty `failure` is what later claims of the key answer.
  void Unclaim(const std::string& key, const std::string& failure);
  // Gives back every claim of a thread that is going away.
  void DropClaimsOf(const void* owner);

  size_t LiveMappings();
  size_t LiveBytes();
};

// A read-write MAP_SHARED mapping of `size` bytes of an open file, for memory two processes
// share; throws a coded NativeError. UnmapWritable gives it back.
void* MapWritableFile(int fd, size_t size);
void UnmapWritable(void* data, size_t size);

}  // namespace kiln::shared_file
