// The KV transfer of prefill/decode disaggregation in one include: the producer's server and the
// consumer's client (kv_pull.h holds the types they share, kv_wire.h the frames).
#pragma once

#include "tern/disagg/kv_pull.h"
#include "tern/disagg/kv_transfer_client.h"
#include "tern/disagg/kv_transfer_server.h"
