// kiln_shared_file: one read-only mapping of a file per process, handed to each thread that
// asks as an ArrayBuffer over the same memory. An engine that reads weights in place from a
// buffer (ONNX Runtime's ORT format) then holds one copy of them however many worker threads
// run the model; a SharedArrayBuffer cannot serve, as Node-API takes it for no ArrayBuffer.
#include <napi.h>

#include "kiln/napi/args.h"
#include "kiln/napi/errors.h"
#include "mapping_registry.h"

namespace kiln::napi {
// Every failure here is already a NativeError or a system error described by its message.
bool TranslateEngineException(const std::exception_ptr&, ErrorInfo&) { return false; }
}  // namespace kiln::napi

namespace kiln::shared_file {
namespace {

// The ArrayBuffer holds one count on the mapping; its collection gives it back.
Napi::ArrayBuffer Wrap(Napi::Env env, Mapping* mapping) {
  try {
    return Napi::ArrayBuffer::New(
        env, mapping->data, mapping->size,
        [](Napi::Env, void*, Mapping* held) { MappingRegistry::Instance().Release(held); },
        mapping);
  } catch (...) {
    MappingRegistry::Instance().Release(mapping);
    throw;
  }
}

std::string RequireKey(const Napi::CallbackInfo& info) {
  std::string key = napi::RequireString(napi::Arg(info, 0), "key");
  napi::Check(!key.empty(), napi::code::kInvalidInput, "key must not be empty");
  return key;
}

Napi::Value Share(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const std::string key = RequireKey(info);
  const std::string path = napi::RequireString(napi::Arg(info, 1), "path");
  return Wrap(info.Env(), MappingRegistry::Instance().Share(key, path));
  KILN_NAPI_END(info.Env())
}

Napi::Value Find(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  Mapping* mapping = MappingRegistry::Instance().Find(RequireKey(info));
  if (mapping == nullptr) return info.Env().Undefined();
  return Wrap(info.Env(), mapping);
  KILN_NAPI_END(info.Env())
}

// "claimed" when the caller now creates the file, "busy" while another thread does (or the
// mapping is alive: find it), else "failed: " and what an earlier claim's holder reported.
Napi::Value Claim(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const std::string answer =
      MappingRegistry::Instance().Claim(RequireKey(info), static_cast<napi_env>(info.Env()));
  if (answer.empty()) return Napi::String::New(info.Env(), "claimed");
  if (answer == "busy") return Napi::String::New(info.Env(), answer);
  return Napi::String::New(info.Env(), "failed: " + answer);
  KILN_NAPI_END(info.Env())
}

Napi::Value Unclaim(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const std::string key = RequireKey(info);
  std::string failure;
  if (info.Length() > 1 && !info[1].IsUndefined()) failure = napi::RequireString(info[1], "failure");
  MappingRegistry::Instance().Unclaim(key, failure);
  return info.Env().Undefined();
  KILN_NAPI_END(info.Env())
}

// A writable shared mapping of a whole open file (MAP_SHARED): what this process writes, another
// process mapping the same file reads. Not registered under a key; unmapped once the
// ArrayBuffer is collected. The descriptor may be closed afterwards.
Napi::Value MapWritable(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  const int64_t fd = napi::RequireInt(napi::Arg(info, 0), "fd");
  const int64_t size = napi::RequireInt(napi::Arg(info, 1), "size");
  napi::Check(fd >= 0, napi::code::kInvalidInput, "fd must be a file descriptor");
  napi::Check(size > 0, napi::code::kInvalidInput, "size must be positive");
  void* data = MapWritableFile(static_cast<int>(fd), static_cast<size_t>(size));
  return Napi::ArrayBuffer::New(
      info.Env(), data, static_cast<size_t>(size),
      [](Napi::Env, void* mapped, size_t* length) {
        UnmapWritable(mapped, *length);
        delete length;
      },
      new size_t(static_cast<size_t>(size)));
  KILN_NAPI_END(info.Env())
}

Napi::Value Stats(const Napi::CallbackInfo& info) {
  KILN_NAPI_BEGIN
  Napi::Object stats = Napi::Object::New(info.Env());
  auto& registry = MappingRegistry::Instance();
  stats.Set("mappings", Napi::Number::New(info.Env(), static_cast<double>(registry.LiveMappings())));
  stats.Set("bytes", Napi::Number::New(info.Env(), static_cast<double>(registry.LiveBytes())));
  return stats;
  KILN_NAPI_END(info.Env())
}

}  // namespace
}  // namespace kiln::shared_file

namespace {
using namespace kiln::shared_file;

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("share", Napi::Function::New<Share>(env, "share"));
  exports.Set("find", Napi::Function::New<Find>(env, "find"));
  exports.Set("claim", Napi::Function::New<Claim>(env, "claim"));
  exports.Set("unclaim", Napi::Function::New<Unclaim>(env, "unclaim"));
  exports.Set("mapWritable", Napi::Function::New<MapWritable>(env, "mapWritable"));
  exports.Set("stats", Napi::Function::New<Stats>(env, "stats"));
  // A worker thread that ends while it holds a claim (terminated mid-conversion) gives it back,
  // so the threads waiting on it go on.
  napi_env raw = env;
  env.AddCleanupHook([raw]() { MappingRegistry::Instance().DropClaimsOf(raw); });
  return exports;
}

}  // namespace

NODE_API_MODULE(kiln_shared_file, Init)
