#include "tvm_params.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace kiln_conformance {

namespace {

constexpr uint64_t kNDArrayListMagic = 0xF7E58D4F05049CB7ULL;
constexpr uint64_t kNDArrayMagic = 0xDD5E40F096B4A13FULL;
// Far beyond any conformance model; keeps a corrupt count from allocating without bound.
constexpr uint64_t kMaxEntries = 4096;
constexpr int32_t kMaxDims = 32;

class Cursor {
 public:
  Cursor(const std::vector<uint8_t>& bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  template <typename T>
  T Read(const char* what) {
    T value;
    Need(sizeof(T), what);
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  void Copy(uint64_t length, std::vector<uint8_t>& out, const char* what) {
    Need(length, what);
    out.assign(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_),
               bytes_.begin() + static_cast<std::ptrdiff_t>(pos_ + length));
    pos_ += length;
  }

  bool AtEnd() const { return pos_ == bytes_.size(); }

  [[noreturn]] void Fail(const std::string& why) const {
    throw std::runtime_error(path_ + " is not a TVM params file: " + why);
  }

 private:
  void Need(uint64_t length, const char* what) const {
    if (length > bytes_.size() - pos_) Fail(std::string("truncated while reading ") + what);
  }

  const std::vector<uint8_t>& bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

std::map<std::string, ParamArray> ReadTvmParams(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  Cursor in(bytes, path);
  if (in.Read<uint64_t>("the header") != kNDArrayListMagic) in.Fail("wrong magic number");
  in.Read<uint64_t>("the reserved word");
  uint64_t name_count = in.Read<uint64_t>("the name count");
  if (name_count > kMaxEntries) in.Fail("too many names");
  std::vector<std::string> names;
  for (uint64_t i = 0; i < name_count; ++i) {
    uint64_t length = in.Read<uint64_t>("a name length");
    std::vector<uint8_t> name;
    in.Copy(length, name, "a name");
    names.emplace_back(name.begin(), name.end());
  }
  uint64_t array_count = in.Read<uint64_t>("the array count");
  if (array_count != name_count) in.Fail("the name and array counts differ");
  std::map<std::string, ParamArray> params;
  for (uint64_t i = 0; i < array_count; ++i) {
    if (in.Read<uint64_t>("an array header") != kNDArrayMagic) in.Fail("wrong array magic number");
    in.Read<uint64_t>("an array's reserved word");
    in.Read<int32_t>("a device type");
    in.Read<int32_t>("a device id");
    int32_t ndim = in.Read<int32_t>("a rank");
    if (ndim < 0 || ndim > kMaxDims) in.Fail("invalid rank");
    ParamArray array;
    array.code = in.Read<uint8_t>("a type code");
    array.bits = in.Read<uint8_t>("a type width");
    array.lanes = in.Read<uint16_t>("a type's lanes");
    uint64_t elements = 1;
    for (int32_t d = 0; d < ndim; ++d) {
      int64_t dim = in.Read<int64_t>("a dimension");
      if (dim < 0 || dim > (int64_t{1} << 40)) in.Fail("invalid dimension");
      array.shape.push_back(dim);
      elements *= static_cast<uint64_t>(dim);
      if (elements > (uint64_t{1} << 40)) in.Fail("array too large");
    }
    uint64_t byte_size = in.Read<uint64_t>("a data size");
    if (byte_size != elements * ((array.bits + 7u) / 8u) * array.lanes) {
      in.Fail("data size does not match the shape of '" + names[i] + "'");
    }
    in.Copy(byte_size, array.data, "array data");
    params[names[i]] = std::move(array);
  }
  if (!in.AtEnd()) in.Fail("unexpected bytes after the last array");
  return params;
}

}  // namespace kiln_conformance
