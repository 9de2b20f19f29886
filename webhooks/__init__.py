"""Signed webhooks when a batch ends (issue #26, docs/webhooks.md).

* ``models``     TeamWebhook (a team's default URL and secrets), WebhookEvent (one per batch end, a due
                 row), DeliveryAttempt (the log)
* ``signing``    Standard Webhooks: secrets (``whsec_…``) and the ``webhook-*`` headers
* ``events``     the batch-finished receiver: one event row per batch end, then the delivery kicked
* ``services``   team secrets and URLs, redelivery
* ``selectors``  reads for the admin, the dashboard and the due queue
* ``delivery``   the one module that sends webhook HTTP (resolve, check every address, pinned connect)
* ``worker``     one slice of due deliveries (claim_due), an attempt's outcome → the next due_at
* ``tasks``      the thin Celery task; ``apps`` registers the due queue and the signal receiver
"""
