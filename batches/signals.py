"""What happens to batches, told to whoever listens (Django signals, sent synchronously).

``batches`` sits below ``observability`` and ``audit`` in the import layers
(tests/architecture/test_layers.py), so it does not call them: it sends these signals and those apps
connect their receivers in ``AppConfig.ready`` (observability.apps, audit.apps).

* ``batch_started(batch)`` — a batch turned running (sent after the transaction commits);
* ``batch_finished(batch, line)`` — the finalizing transaction committed; ``line`` is the batch report;
* ``batch_action(model, object_id, object_repr, action, changes)`` — a staff or team action on a batch
  (cancelled, retried, content viewed), sent inside the transaction that made it, so its audit row commits with it.
"""

from __future__ import annotations

from django.dispatch import Signal

batch_started = Signal()
batch_finished = Signal()
batch_action = Signal()
