"""Provider simulator: an OpenAI-compatible server hosting several rate-limited fake providers."""
