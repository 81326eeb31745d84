"""Prometheus metrics of a service (served with its health on its HTTP port: services.runner).

Names follow Prometheus conventions: base units (seconds), ``_total`` for
counters; money is in the table's minor unit, said in the name. Each service
serves ``/metrics``, ``/healthz`` (alive) and ``/readyz`` (caught up with the
stream) on its HTTP port.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Why the archiver could not seal or remove a shoe (casino_archive_failures_total's reasons).
ARCHIVE_FAILURES = ("verification", "read_back", "differs", "removal", "stray")


class Metrics:
    """Every metric the services export, in one registry per process."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.registry = r = CollectorRegistry()
        self.coups_dealt = Counter("casino_coups_dealt_total", "Coups dealt to a result.",
                                   ["table", "game", "procedure"], registry=r)
        self.cards_dealt = Counter("casino_cards_dealt_total", "Cards dealt to hands.", ["table", "game"], registry=r)
        self.reshuffles = Counter("casino_reshuffles_total", "Reshuffles required, by reason (clause).",
                                  ["table", "reason"], registry=r)
        self.card_incidents = Counter(
            "casino_card_incidents_total", "Cards from a card-reading shoe a coup (or, between coups, the next "
            "coup's opening) was held for, by kind (misdrawn, refused, unread, cut_card): each one is for "
            "surveillance and waits for a supervisor's ruling; and (while_closed) those reported while the table "
            "was closed, counted and not taken.", ["table", "kind"], registry=r)
        self.tables_closed = Counter(
            "casino_tables_closed_total", "Card-reading tables their shoe's incidents closed, by the setting that "
            "closed them (setting shoe.end_shoe_after: a second shoe in a row to end by a ruling; setting "
            "shoe.most_awaiting: too many incidents awaiting a ruling).", ["table", "clause"], registry=r)
        self.table_closed = Gauge(
            "casino_table_closed", "1 while the table is closed by its card-reading shoe's incidents, until a "
            "supervisor reopens it.", ["table"], registry=r)
        self.shoes_ended = Counter(
            "casino_shoes_ended_by_ruling_total", "Card-reading shoes a supervisor's ruling ended (out of their "
            "order, or their cut card out of place): each one is for surveillance.", ["table"], registry=r)
        self.orders_replaced = Counter(
            "casino_shuffler_orders_replaced_total", "Orders a card-reading table's shuffling machine reported in "
            "place of the one kept for a shoe, before its first card: each one is for surveillance.", ["table"],
            registry=r)
        self.awaiting_card = Gauge(
            "casino_table_awaiting_card_since_timestamp_seconds", "Since when the table's coup has waited for its "
            "card-reading shoe's next card (0: it waits for none).", ["table"], registry=r)
        self.refused = Counter("casino_commands_refused_total", "Commands refused, by the clause that refused them.",
                               ["service", "clause"], registry=r)
        self.wagered = Counter("casino_wagered_minor_units_total", "Stakes accepted, in minor units.",
                               ["table", "bet"], registry=r)
        self.paid = Counter("casino_paid_out_minor_units_total", "Returned to players at settlement, in minor units.",
                            ["table"], registry=r)
        self.house_net = Gauge("casino_house_net_minor_units", "House net per table since the first event.",
                               ["table"], registry=r)
        self.penetration = Gauge("casino_shoe_penetration_ratio", "Share of the shoe in play already dealt.",
                                 ["table"], registry=r)
        self.coup_duration = Histogram("casino_coup_duration_seconds", "From opening a coup to its settlement.",
                                       ["game"], buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
                                       registry=r)
        self.commands = Histogram("casino_command_seconds", "Time to answer one command, refusals included.",
                                  ["service"], registry=r)
        self.handling = Histogram("casino_event_handling_seconds", "Time to handle one delivery of events.",
                                  ["service"], registry=r)
        self.pending = Gauge("casino_consumer_pending_messages", "Messages the consumer has not yet received.",
                             ["consumer"], registry=r)
        self.redelivered = Gauge("casino_consumer_redelivered_messages", "Messages delivered more than once.",
                                 ["consumer"], registry=r)
        self.ack_pending = Gauge("casino_consumer_ack_pending_messages", "Messages delivered and not yet acknowledged.",
                                 ["consumer"], registry=r)
        self.dead_letters = Counter("casino_dead_letters_total", "Events a consumer filed as dead letters.",
                                    ["consumer"], registry=r)
        self.deliveries_refused = Counter(
            "casino_deliveries_refused_total", "Messages on a consumer's deliver subject that its consumer did not "
            "deliver (no ack subject of its own): dropped.", ["consumer"], registry=r)
        self.read_back = Counter("casino_coups_read_back_total",
                                 "Coups read back from the stream because they were not followed whole as they passed "
                                 "(after a restart, a redelivery, or deliveries shared with another instance).",
                                 ["service"], registry=r)
        self.coup_open = Gauge("casino_table_coup_open", "1 while a coup is open at the table (not yet settled).",
                               ["table"], registry=r)
        self.last_event = Gauge("casino_table_last_event_timestamp_seconds", "Time of the table's latest event.",
                                ["table"], registry=r)
        self.verified = Counter("casino_coups_verified_total", "Settled coups verified against the rules.",
                                ["table"], registry=r)
        self.verification_failures = Counter("casino_verification_failures_total",
                                             "Coups or shoes whose records differ from the rules.", ["table"],
                                             registry=r)
        self.archive_sealed = Counter("casino_archive_sealed_shoes_total", "Ended shoes sealed into the archive.",
                                      ["table"], registry=r)
        self.archive_removed = Counter("casino_archive_removed_messages_total",
                                       "Messages of sealed shoes removed from the live stream.", ["table"], registry=r)
        self.archive_failures = Counter("casino_archive_failures_total",
                                        "Shoes that could not be sealed or removed, by reason.", ["table", "reason"],
                                        registry=r)
        self.archive_backlog = Gauge("casino_archive_backlog_shoes", "Ended shoes not yet sealed.", ["table"],
                                     registry=r)
        self.stream_messages = Gauge("casino_stream_messages", "Messages a stream holds.", ["stream"], registry=r)
        self.stream_bytes = Gauge("casino_stream_bytes", "Bytes a stream holds.", ["stream"], registry=r)
        self.ready = Gauge("casino_ready", "1 once the service has caught up with the stream.", ["service"],
                           registry=r)
        self.partitions = Gauge("casino_partitions_owned", "Partitions of the tables this instance owns "
                                "(its commands and its tables: services.ownership).", ["service"], registry=r)
        self.ready.labels(service).set(0)
        self.read_back.labels(service)  # at zero until the first
        self.is_ready = False

    def archiving(self, table: str) -> None:
        """The table's archive counters, each failure's reason among them, at
        zero until their first: an alert on their increase sees the first one
        (a series that appears at 1 has risen from nothing Prometheus knew)."""
        self.archive_sealed.labels(table)
        self.archive_removed.labels(table)
        for reason in ARCHIVE_FAILURES:
            self.archive_failures.labels(table, reason)

    def set_ready(self, ready: bool) -> None:
        self.is_ready = ready
        self.ready.labels(self.service).set(1 if ready else 0)


def count_recorded(metrics: Metrics | None, table: str, events: Sequence[object], procedure: str = "") -> None:
    """Count the facts a service has just recorded (its own appends only, so two
    instances never count one fact twice)."""
    from casino import games
    from casino.rules import settlement, shoe, wagerbook

    if metrics is None:
        return
    for e in events:
        if (game := games.RESULT_OF.get(type(e))) is not None:
            metrics.coups_dealt.labels(table, game, procedure or game).inc()
            continue
        if (game := games.DEALT_IN.get(type(e))) is not None:
            metrics.cards_dealt.labels(table, game).inc()
            continue
        match e:
            case shoe.ReshuffleRequired():
                metrics.reshuffles.labels(table, e.clause).inc()
            case shoe.OrderReplaced():
                metrics.orders_replaced.labels(table).inc()
            case wagerbook.WagerPlaced():
                metrics.wagered.labels(table, e.wager.bet).inc(e.wager.amount)
            case wagerbook.ExtraPlaced():
                metrics.wagered.labels(table, e.kind).inc(e.amount)
            case settlement.CoupSettled():
                metrics.paid.labels(table).inc(e.returned)
