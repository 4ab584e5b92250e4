#include "mapping_registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <iterator>
#include <mutex>
#include <stdexcept>

#include "kiln/napi/errors.h"
#include <unordered_map>

namespace kiln::shared_file {
namespace {

std::mutex registry_mutex;
// Leaked on purpose: finalizers may run while the process exits, after static destructors.
auto* mappings = new std::unordered_map<std::string, Mapping*>();
auto* claims = new std::unordered_map<std::string, const void*>();
auto* failures = new std::unordered_map<std::string, std::string>();

napi::NativeError SystemError(const std::string& what, const std::string& path) {
  return napi::NativeError(napi::code::kModelLoadFailed, what + " " + path + ": " + std::strerror(errno));
}

// Maps the whole file read-only. PROT_READ: a stray write faults at once instead of changing
// what every other thread computes with.
Mapping* MapFile(const std::string& key, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SystemError("cannot open", path);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const auto error = SystemError("cannot stat", path);
    ::close(fd);
    throw error;
  }
  if (!S_ISREG(info.st_mode) || info.st_size <= 0) {
    ::close(fd);
    throw napi::NativeError(napi::code::kInvalidInput, "not a non-empty regular file: " + path);
  }
  const auto size = static_cast<size_t>(info.st_size);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive, even once it is unlinked
  if (data == MAP_FAILED) {
    errno = map_errno;
    throw SystemError("cannot map", path);
  }
  return new Mapping{key, data, size, 0};
}

}  // namespace

MappingRegistry& MappingRegistry::Instance() {
  static MappingRegistry registry;
  return registry;
}

Mapping* MappingRegistry::Share(const std::string& key, const std::string& path) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto found = mappings->find(key);
  if (found != mappings->end()) {
    ++found->second->holders;
    return found->second;
  }
  Mapping* mapping = MapFile(key, path);
  mapping->holders = 1;
  mappings->emplace(key, mapping);
  return mapping;
}

Mapping* MappingRegistry::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto found = mappings->find(key);
  if (found == mappings->end()) return nullptr;
  ++found->second->holders;
  return found->second;
}

void MappingRegistry::Release(Mapping* mapping) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  if (--mapping->holders > 0) return;
  mappings->erase(mapping->key);
  ::munmap(mapping->data, mapping->size);
  delete mapping;
}

std::string MappingRegistry::Claim(const std::string& key, const void* owner) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto failed = failures->find(key);
  if (failed != failures->end()) return failed->second;
  if (mappings->count(key) > 0 || claims->count(key) > 0) return "busy";
  claims->emplace(key, owner);
  return "";
}

void MappingRegistry::Unclaim(const std::string& key, const std::string& failure) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  claims->erase(key);
  if (!failure.empty()) (*failures)[key] = failure;
}

void MappingRegistry::DropClaimsOf(const void* owner) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (auto it = claims->begin(); it != claims->end();) {
    it = it->second == owner ? claims->erase(it) : std::next(it);
  }
}

size_t MappingRegistry::LiveMappings() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return mappings->size();
}

size_t MappingRegistry::LiveBytes() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  size_t bytes = 0;
  for (const auto& entry : *mappings) bytes += entry.second->size;
  return bytes;
}

void* MapWritableFile(int fd, size_t size) {
#ifdef __linux__
  // Reserve the pages now: on a full tmpfs a write through the mapping would otherwise raise
  // SIGBUS in the middle of a copy, where no error can be returned.
  const int reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (reserved != 0) {
    errno = reserved;
    throw SystemError("cannot reserve " + std::to_string(size) + " bytes in", "file descriptor " + std::to_string(fd));
  }
#endif
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) throw SystemError("cannot map", "file descriptor " + std::to_string(fd));
  return data;
}

void UnmapWritable(void* data, size_t size) { ::munmap(data, size); }

}  // namespace kiln::shared_file
