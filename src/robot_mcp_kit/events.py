"""EventPoster: sends signed TaskEvents to the brain, in order, at least once (kit spec §3.1, §4.3).

One poster per server. :meth:`EventPoster.post` puts the event at the tail of its task's
lane in one bounded queue and returns at once; each lane's runner sends its head,
retrying it on the schedule of :class:`~robot_mcp_kit._retry.RetryPolicy` until a 2xx
acknowledges it or the 10-minute cap gives it up, and only then the task's next event, so
each task's events arrive in ``seq`` order. Lanes run side by side (at most
``max_in_flight`` attempts at once): an event a receiver keeps refusing holds back only
its own task (``docs/delivery.md``).

Contracts:

- ``post()`` never blocks on the network and never raises. When the queue is full the
  OLDEST waiting event is dropped, logged at ERROR and counted.
- The body bytes are produced once per event; each attempt signs them with a fresh
  timestamp, so a retry ten minutes later still passes the receiver's ±300 s check.
- Any non-2xx status, timeout, connection error or unreadable response is retried
  (0.5 s, 2 s, 8 s, then every 30 s). A ``Retry-After`` in seconds or as an HTTP date
  lengthens the next pause up to 30 s, never shortens it.
- One attempt lasts at most ``timeout_s`` (10 s) of real time, whatever the receiver
  does: connect, send, status line, headers and the little body read after them share
  that one deadline, so a receiver that trickles its answer a byte at a time cannot hold
  the queue (docs/decisions/0005-poster-attempt-deadline.md).
- A 2xx status is the acknowledgement. The body after it is read (and discarded) for at
  most 64 KiB and 1 s, so the connection can be reused; whatever the body then does
  (trickles, never ends, breaks), the event counts as delivered. A non-2xx answer whose
  head or body is trickled is a failed attempt like any other.
- ``aclose()`` delivers what is queued for up to ``close_grace_s``, then stops, closes
  the HTTP client and logs at WARNING how many events it dropped. The grace bounds the
  event loop's real time; retry pauses are also cut off once they would end past the
  grace on the poster's clock (the same thing under the system clock).

Configuration comes from the environment when not passed: ``RVC_CALLBACK_URL`` (unset or
empty: no-op mode, events are logged at DEBUG), ``RVC_EVENT_SECRET`` (required when a
URL is set; construction raises :class:`~robot_mcp_kit.ConfigurationError` otherwise) and
``RVC_OUTBOX`` (the durable outbox's file; unset or empty: none).

With a durable outbox (``outbox=path``; ``docs/delivery.md``) each event is
also kept in a SQLite file before its first attempt, and settled there when acknowledged,
given up or dropped. ``aclose()`` then drops nothing: what is undelivered stays in the file
(counted as ``kept``), and the next poster on that file sends it first, in its original
order with its original ``event_id``, its 10-minute budget counted from when it was first
accepted. The size cap is ``queue_max``, as without an outbox. Without ``outbox`` nothing
of this runs.

Delivery comes first: when the file cannot be written (a full disk), events are sent all
the same, in order, counted not durable (``stats.outbox_not_durable``; a crash before
their rows are written loses them), and their rows are written once the file takes them
(``outbox_written_late``); at most ``queue_max`` unwritten rows are held in memory, past
which the oldest rows of delivered or given-up events are forgotten
(``outbox_rows_forgotten``); ``stats.outbox_failing``, ``outbox_unwritten`` and
``outbox_write_failures`` say how it stands, and the log has one line when it starts and
one when it ends. One process per file: a second poster on a file another holds
raises :class:`~robot_mcp_kit.OutboxLocked`; a damaged file raises
:class:`~robot_mcp_kit.store.StoreUnreadable` at construction, nothing in it sent.

The poster is bound to the event loop of its first ``post()``; construct it anywhere
(at module import too), use it from one loop.
"""

from __future__ import annotations

from robot_mcp_kit._outbox import ENV_OUTBOX
from robot_mcp_kit._poster import ENV_CALLBACK_URL, ENV_EVENT_SECRET, EventPoster, PosterStats

__all__ = ["ENV_CALLBACK_URL", "ENV_EVENT_SECRET", "ENV_OUTBOX", "EventPoster", "PosterStats"]
