"""What the REST service takes: sizes of requests and answers, waits, threads.

Example:
    >>> MAX_URL < MAX_REQUEST_LINE  # statekit's own 414 answers before the server's
    True
"""

DEFAULT_LIMIT = 10_000
MAX_URL = 60_000             # bytes of a request's target (path and query; httptools parses
                             # up to 64 KiB): two keys of 5 columns of MAX_KEY_VALUE_CHARS
                             # characters fit, however escaped
MAX_BODY = 65_536            # bytes of a request's body
MAX_BODY_DEPTH = 16          # levels a JSON body's arrays and objects nest (an assignment:
                             # 4), far below Python's recursion limit
MAX_WAIT = 30.0              # seconds a query may wait for min_batch
HEADER_TIMEOUT = 10.0        # seconds a connection has to send a request's whole head
                             # (request line and headers): uvicorn has no such bound
BODY_TIMEOUT = 30.0          # seconds a request has to send its whole body once its head
                             # arrived (MAX_BODY at 2.2 KB/s): uvicorn has no such bound
MAX_REQUEST_LINE = 262_144   # bytes of a request's target (and h11's head) the server itself
                             # reads: well over MAX_URL, so statekit's own 414 answers first
MAX_ID = 2**53 - 1           # batch ids and versions: whole numbers JSON (a double) holds exactly
QUERY_THREADS = 32           # queries reading a store or asking other instances, at once
CONTROL_THREADS = 4          # /metadata and POST /assignment: threads of their own
# partitions as ASCII digits without leading zeros (the same in Python, Rust and ECMA regexes)
PARTITIONS = r"^(0|[1-9][0-9]{0,5})(,(0|[1-9][0-9]{0,5}))*$"
