// tokenizer/decoder.h — tokenizer.json "decoder" section: ByteLevel, Replace,
// ByteFallback, Fuse, Strip, Metaspace and Sequence, with HF tokenizers' semantics
// (each works on the list of token strings; ByteLevel repairs bytes lossily).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nextn {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  static std::unique_ptr<Decoder> from_json(const nlohmann::json& j);
};

}  // namespace nextn
