"""Development and demo settings: DEBUG on unless told otherwise."""

from gateway_site.env import env_bool

from .base import *  # noqa: F403

DEBUG = env_bool("DJANGO_DEBUG", True)
