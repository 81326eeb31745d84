"""The archiver service's faststream application, for `faststream docs gen
services.archiver.app:app --factory` and `faststream run` ($CASINO_NATS_URL)."""

from faststream.asgi import AsgiFastStream

from services import runner


def app() -> AsgiFastStream:
    return runner.app("archiver")

