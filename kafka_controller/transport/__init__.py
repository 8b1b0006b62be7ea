"""The wire protocol between controller, brokers and admin clients.

**Connection.** TCP. The client sends one request and waits for its answer before sending the next
(one request in flight per connection; open more connections for parallelism). Connections are
long-lived; a client reconnects on its next request after any failure.

**Frames.** Each message is a 4-byte big-endian unsigned length ``N`` (1 <= N <= max_frame_bytes,
100 MiB by default, Kafka's ``socket.request.max.bytes``) followed by ``N`` bytes of one JSON
document (UTF-8, written and read with orjson). Readers allocate as the bytes arrive, never the
announced ``N`` up front.

**Envelopes.**

* request:  ``{"api": "LeaderAndIsr", "v": 1, "cid": 42, "body": {...}}``
* response: ``{"cid": 42, "body": {...}}``
* error:    ``{"cid": 42, "error": {"code": "INVALID_REQUEST", "message": "unknown api 'Foo'"}}``

``v`` is the version of the envelope and body encodings (1). ``cid`` is a correlation id chosen by
the client and echoed by the server (-1 when the server could not read it). The error ``code`` is
a Kafka error name: INVALID_REQUEST for bad JSON, a bad envelope, an unknown API, an unsupported
``v`` or a malformed body; UNKNOWN_SERVER_ERROR when the handler failed. A frame length of 0 or
above the limit is answered with INVALID_REQUEST and the connection is closed; every other error
leaves it open.

**Bodies.** Kafka's request and response fields in Python spelling (``controller_id``,
``broker_epoch``, ``topic_ids`` ...). Partition states are columnar: ``"partitions"`` holds one
array per field over all partitions, in request order (``{"topic": [0, 0, 1], "partition": [0, 1,
0], "leader": [...], "isr": [...], ...}``). Topic names, replica lists and error names are
dictionary-encoded: ``"topics"``, ``"replica_sets"`` and ``"errors"`` list each distinct value once
and the columns hold indexes. All-empty optional columns (adding/removing replicas, ``is_new``)
are left out. Measured on loopback (``bench/transport.py``): 3-11x fewer bytes and 6-9x faster
round trips than stdlib ``json`` with one object per partition, 2-3.5x faster than orjson with
one object per partition. Brokers are
``{"id", "endpoints": [[host, port, listener, protocol]], "rack", "features": [[name, min, max]]}``.
Admin APIs carry plain JSON bodies and are added with one ``DEFAULT_APIS.register_json(name)``.

**Threads.** ``TransportServer`` reads and writes every connection on one network thread per
listener and runs handlers on a fixed pool (``num.io.threads``), with controller requests on a
thread of their own (``server``'s docstring says why; ``docs/connection-layer.md``). Broker-side
handlers may block; controller-side handlers only enqueue an event (and may wait for its callback).
A connection idle for ``connections.max.idle.ms`` is closed by the server; the client replaces it
before its next request.
"""
