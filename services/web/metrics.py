"""The web service's own figures, on its ``/metrics``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.web.liveness import RESTARTS_MOST, RESTARTS_WITHIN, SERVICES


class WebMetrics:
    """The web service's own figures, on its ``/metrics``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("casino_web_requests", "Pages asked for, by page", ["page"], registry=self.registry)
        self.seconds = Histogram("casino_web_page_seconds", "Time to answer a page, by page", ["page"],
                                 registry=self.registry, buckets=(.005, .01, .025, .05, .1, .2, .5, 1, 2.5, 5))
        self.streams = Gauge("casino_web_streams", "Browsers connected to the floor's live stream",
                             registry=self.registry)
        self.drawn = Counter("casino_web_tiles_drawn", "Tiles drawn again (once for every browser)",
                             registry=self.registry)
        self.sent = Counter("casino_web_tiles_sent", "Tiles sent to browsers", registry=self.registry)
        self.down = Gauge("casino_web_services_down", "Services the floor shows with no live instance",
                          registry=self.registry)
        self.started = Counter("casino_web_service_instances_started", "Instances of each service seen starting "
                               "since the web started (each restart of a process is a new instance)", ["service"],
                               registry=self.registry)
        for service in SERVICES:
            self.started.labels(service)
        self.restarting = Gauge("casino_web_services_restarting", "Services the floor shows as dying again and "
                                f"again ({RESTARTS_MOST} instances started within {RESTARTS_WITHIN:.0f} s)",
                                registry=self.registry)
