"""OpenAI Batch API–compatible surface (`/v1/files`, `/v1/batches`, docs/contract.md §6) over the native batches."""
