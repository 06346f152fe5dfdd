#include "tern/server/api_error.h"

#include <cctype>

namespace tern::server {

const char* error_type_for_status(int status) {
  switch (status) {
    case 400:
      return "BadRequestError";
    case 401:
      return "AuthenticationError";
    case 403:
      return "PermissionDeniedError";
    case 404:
      return "NotFoundError";
    case 405:
      return "MethodNotAllowedError";
    case 413:
      return "RequestTooLargeError";
    case 422:
      return "UnprocessableEntityError";
    case 503:
      return "ServiceUnavailableError";
    default:
      return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

nlohmann::json error_body(int status, const std::string& message, const std::string& param) {
  nlohmann::json error = {
      {"message", message},
      {"type", error_type_for_status(status)},
      {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
      {"code", status}};
  return {{"error", std::move(error)}};
}

ApiError bad_request_from(const Error& e) {
  // "'n' must be an integer" (a type error) or "top_p must be in …" (a range error).
  std::string message = e.what();
  std::string field;
  size_t i = message[0] == '\'' ? 1 : 0;
  while (i < message.size() &&
         (std::isalnum(static_cast<unsigned char>(message[i])) || message[i] == '_'))
    field += message[i++];
  const bool named =
      !field.empty() &&
      (message.compare(i, 9, " must be ") == 0 || message.compare(i, 10, "' must be ") == 0 ||
       message.compare(i, 1, "[") == 0 || message.compare(i, 17, "' is out of range") == 0);
  return ApiError(400, message, named ? field : std::string());
}

}  // namespace tern::server
