// An error a request earns, with the HTTP status and the OpenAI / vLLM error body it is answered
// with: {"error": {"message", "type", "param", "code"}}, code = the HTTP status as vLLM sets it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tern/core/error.h"

namespace tern::server {

class ApiError : public Error {
 public:
  ApiError(int status, const std::string& message, std::string param = {})
      : Error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

// The error type vLLM / the OpenAI SDK name for a status ("BadRequestError", "NotFoundError", …).
const char* error_type_for_status(int status);

// The body of an error response; `param` empty → null.
nlohmann::json error_body(int status, const std::string& message, const std::string& param = {});

// A 400 from a tern::Error that SamplingParams::validate or update_sampling_params raised: their
// messages start with the field's name ("top_p must be in (0, 1], got 2"), which becomes param.
ApiError bad_request_from(const Error& e);

}  // namespace tern::server
