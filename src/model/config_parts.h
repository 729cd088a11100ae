// Pieces of config.json parsing shared between the files of src/model.
#pragma once

#include "exactq/model.h"
#include "model/json_fields.h"

namespace exactq {

// `quantization` / `quantization_config` of the top-level object (absent: base is nullopt).
QuantizationConfig parse_quantization(const Fields& root);

}  // namespace exactq
