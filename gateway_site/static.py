"""WhiteNoise, sync and async: the static files (admin, dashboards, Swagger UI) under WSGI as before,
and under ASGI without putting every request through a thread — only a request for a static file is
served by WhiteNoise (sync) in a thread; every other request goes straight on."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.http import Http404
from whitenoise.middleware import WhiteNoiseMiddleware


def _not_found(request):
    raise Http404(request.path_info)


class StaticFilesMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
            self.whitenoise = WhiteNoiseMiddleware(_not_found)
            self.prefix = "/" + str(settings.STATIC_URL or "/static/").lstrip("/")
        else:
            self.whitenoise = WhiteNoiseMiddleware(get_response)

    def __call__(self, request):
        if not self.is_async:
            return self.whitenoise(request)
        return self._acall(request)

    async def _acall(self, request):
        if request.path_info.startswith(self.prefix):
            return await sync_to_async(self.whitenoise, thread_sensitive=False)(request)
        return await self.get_response(request)
