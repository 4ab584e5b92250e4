// The DLR C API functions this addon calls, declared from DLR's public header (include/dlr.h,
// DLR 1.5 and later) as pointer types. The addon resolves them from libdlr at run time, so it
// builds and loads without DLR installed.
#pragma once

#include <cstdint>

namespace kiln::dlr_addon {

typedef void* DLRModelHandle;

struct DlrApi {
  // Required: a library lacking any of these is not a usable DLR.
  int (*CreateDLRModel)(DLRModelHandle* handle, const char* model_path, int dev_type, int dev_id);
  int (*DeleteDLRModel)(DLRModelHandle* handle);
  int (*RunDLRModel)(DLRModelHandle* handle);
  int (*GetDLRNumInputs)(DLRModelHandle* handle, int* num_inputs);
  int (*GetDLRInputName)(DLRModelHandle* handle, int index, const char** input_name);
  int (*GetDLRInputType)(DLRModelHandle* handle, int index, const char** input_type);
  int (*GetDLRInputSizeDim)(DLRModelHandle* handle, int index, int64_t* size, int* dim);
  int (*GetDLRInputShape)(DLRModelHandle* handle, int index, int64_t* shape);
  int (*SetDLRInput)(DLRModelHandle* handle, const char* name, const int64_t* shape,
                     const void* input, int dim);
  int (*GetDLRNumOutputs)(DLRModelHandle* handle, int* num_outputs);
  int (*GetDLROutputType)(DLRModelHandle* handle, int index, const char** output_type);
  int (*GetDLROutputSizeDim)(DLRModelHandle* handle, int index, int64_t* size, int* dim);
  int (*GetDLROutputShape)(DLRModelHandle* handle, int index, int64_t* shape);
  int (*GetDLROutput)(DLRModelHandle* handle, int index, void* out);
  const char* (*DLRGetLastError)();

  // Optional: used when present.
  int (*GetDLRHasMetadata)(DLRModelHandle* handle, bool* has_metadata);
  int (*GetDLROutputName)(DLRModelHandle* handle, const int index, const char** name);
  int (*GetDLRBackend)(DLRModelHandle* handle, const char** name);
  int (*GetDLRDeviceType)(const char* model_path);
  int (*GetDLRVersion)(const char** out);
  int (*SetDLRNumThreads)(DLRModelHandle* handle, int threads);
};

}  // namespace kiln::dlr_addon
