"""The provider-batch route (issue #23, docs/provider_batches.md): items of deadline-tolerant batches
go through their provider's own batch API (OpenAI Batch API, Azure global batch, Anthropic Message
Batches) at about half the price, and fall back to real time when the provider is late.

Modules, one job each: ``models`` (the provider-batch rows, each its own intent and due-work row),
``lines`` (items ⇄ batch lines and line results → engine results), ``grouping`` (items → chunks within
a provider's limits, the intent row stored with the items' claims), ``remote`` (the async batch-API
client run from sync code), ``lifecycle`` (create or adopt, poll, cancel), ``guard`` (the deadline
guard), ``applying`` (results through the one result writer; the rest back to real time), ``due``
(the due-work queue and its thin task's body), ``selectors`` (what pages read).
"""
