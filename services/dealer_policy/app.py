"""The dealer-policy service's faststream application, for `faststream docs gen
services.dealer_policy.app:app --factory` and `faststream run` ($CASINO_NATS_URL)."""

from faststream.asgi import AsgiFastStream

from services import runner


def app() -> AsgiFastStream:
    return runner.app("dealer-policy")
