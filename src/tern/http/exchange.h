// One request's answer as its route handler gives it: whole, or as a stream of pieces, from any
// thread and at any time after the handler returned (when the engine has news). The event loop
// writes it; a handler never holds a thread while its client reads.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "tern/http/http_message.h"

namespace tern::http {

class Exchange {
 public:
  virtual ~Exchange() = default;

  // The whole answer. A status >= 400 with no body gets the server's error page.
  virtual void respond(Response response) = 0;
  // Starts a streamed answer: `head`'s status and headers now (its body, if any, as the first
  // piece), then write() pieces, then end_stream().
  virtual void start_stream(Response head) = 0;
  virtual void write(std::string piece) = 0;
  virtual void end_stream() = 0;

  // Runs `callback` once, on the event loop, when the client goes away (hangs up, stops reading
  // past the write timeout) or the server closes the connection, before the answer ended; at
  // once (posted) when that already happened. Not after the answer ended.
  virtual void on_close(std::function<void()> callback) = 0;
  // Runs `task` on the event loop: what must not race with on_close's callback.
  virtual void post(std::function<void()> task) = 0;

  // Bytes of streamed pieces not yet taken by the client's socket (a producer that can wait
  // holds back above some bound; the engine never does).
  virtual size_t unsent_bytes() const = 0;
  // Whether the connection closed before the answer ended.
  virtual bool closed() const = 0;
};

}  // namespace tern::http
