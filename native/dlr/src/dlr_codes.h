// Stable error codes this addon raises beyond those native/common lists (same strings as
// @kiln/core's KilnErrorCode).
#pragma once

namespace kiln::dlr_addon::code {
inline constexpr const char* kEngineUnavailable = "ENGINE_UNAVAILABLE";
inline constexpr const char* kPredictorBusy = "PREDICTOR_BUSY";
}  // namespace kiln::dlr_addon::code
