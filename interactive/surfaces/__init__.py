"""The interactive lane's surfaces: what a caller speaks (base.py ``Surface``) — chat.py
(``/v1/chat/completions``), responses.py + responses_request.py (``/v1/responses``), messages.py +
messages_request.py (Anthropic's ``/v1/messages``), embeddings.py (``/v1/embeddings``: an embeddings item,
not chat). Each translates to and from the one chat call
interactive/views.py runs (docs/interactive.md, "More surfaces")."""
