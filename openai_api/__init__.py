"""OpenAI Batch API–compatible surface (`/v1/files`, `/v1/batches`, contract §6) over the native batches."""
