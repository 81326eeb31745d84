"""A second implementation of the rules, written from the regulations and the
standard games alone, that reads a raw record as JSON: it imports nothing of
the product (no ``casino``), so it catches what a fold through the product's
own rules library cannot. docs/replay.md describes the record it reads.

``check(record)`` returns every finding, as text naming the coup or shoe and
the rule; an empty list is a record that conforms.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Event = dict[str, Any]
RANKS = "A23456789TJQK"


def read_record(path: Path) -> list[tuple[str, int, list[Event]]]:
    """(subject, sequence, the batch's events with their envelopes) of every stored message, in order."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        out.append((m["subject"], m["seq"], m["batch"]["events"]))
    return out


def by_coup(record: Iterable[tuple[str, int, list[Event]]]) -> tuple[dict[str, list[Event]], dict[str, list[Event]]]:
    """Every coup's events and every shoe's events (each event's data, the envelope's ``table`` beside it)."""
    coups: dict[str, list[Event]] = defaultdict(list)
    shoes: dict[str, list[Event]] = defaultdict(list)
    for subject, _, events in record:
        aggregate = subject.rsplit(".", 1)[1]
        for env in events:
            data = {**env["data"], "_table": env["table"]}
            if aggregate == "shoe" or data["type"].startswith("shoe."):  # its own, or carried in a coup's message
                shoes[data["shoe_id"]].append(data)
            if env["coup"] not in ("-", ""):
                coups[env["coup"]].append(data)
    return coups, shoes


def of(events: list[Event], kind: str, **fields: object) -> list[Event]:
    """The events of ``kind`` (with each of ``fields`` at its value)."""
    return [e for e in events if e["type"] == kind and all(e.get(k) == v for k, v in fields.items())]


# ---- cards ----------------------------------------------------------------


def bac_value(card: str) -> int:
    r = RANKS.index(card[0]) + 1
    return r if r < 10 else 0


def bac_points(cards: list[str]) -> int:
    return sum(bac_value(c) for c in cards) % 10


def bj_total(cards: list[str]) -> tuple[int, bool]:
    total = sum(min(RANKS.index(c[0]) + 1, 10) for c in cards)
    soft = any(c[0] == "A" for c in cards) and total + 10 <= 21
    return (total + 10, True) if soft else (total, False)


def bj_blackjack(cards: list[str], from_split: bool) -> bool:
    return len(cards) == 2 and bj_total(cards)[0] == 21 and not from_split


# ---- seats ----------------------------------------------------------------


def counter_clockwise(seats: list[int], among: Iterable[int]) -> list[int]:
    """``seats`` lists the table from the dealer's left to the dealer's right;
    counter-clockwise is from the dealer's right to the left."""
    chosen = set(among)
    return [s for s in reversed(seats) if s in chosen]


def counter_clockwise_from(seats: list[int], start: int, among: Iterable[int]) -> list[int]:
    ring = counter_clockwise(seats, set(among) | {start})
    i = ring.index(start)
    return [s for s in ring[i:] + ring[:i] if s in set(among)]


def by_stake(stakes: dict[int, int], ties: Any) -> list[int]:
    out: list[int] = []
    for amount in sorted(set(stakes.values()), reverse=True):
        out += ties([s for s, a in stakes.items() if a == amount])
    return out


def own(wagers: list[Event]) -> list[Event]:
    """The seated players' own wagers: back bets are offered nothing (000 8.5, 8.15, 8.25; 001 8.9)."""
    return [w for w in wagers if not w.get("back")]


def stakes_on(wagers: list[Event], bets: tuple[str, ...]) -> dict[int, int]:
    out: dict[int, int] = {}
    for w in own(wagers):
        if w["bet"] in bets:
            out[w["seat"]] = max(out.get(w["seat"], 0), w["amount"])
    return out


# ---- the checker ------------------------------------------------------------


class Checker:
    def __init__(self, record: list[tuple[str, int, list[Event]]]) -> None:
        self.record = record
        self.findings: list[str] = []
        self.rulesets: dict[str, dict[str, Any]] = {}

    def fail(self, where: str, what: str) -> None:
        self.findings.append(f"{where}: {what}")

    def run(self) -> list[str]:
        for _, _, events in self.record:
            for env in events:
                if env["data"]["type"] == "ruleset.recorded":
                    self.ruleset(env["data"])
        coups, shoes = by_coup(self.record)
        for shoe_id, events in shoes.items():
            self.shoe(shoe_id, events)
        holders: dict[str, tuple[int | None, str]] = {}  # table -> the seat and the player keeping the shoe
        seating: dict[str, tuple[tuple[int, str], ...]] = {}
        dealt_by: dict[str, tuple[int, str]] = {}  # table -> its last coup's number and procedure
        for coup in sorted(coups, key=lambda c: (c.rsplit("-", 1)[0], int(c.rsplit("-", 1)[1]))):
            events = coups[coup]
            configured = of(events, "coup.configured")
            if not configured or configured[0]["ruleset_digest"] not in self.rulesets:
                self.fail(coup, "no recorded ruleset with the digest its coup.configured names")
                continue
            rules = self.rulesets[configured[0]["ruleset_digest"]]
            table = configured[0]["table"]
            seating[table] = self.seating(coup, events, seating.get(table, ()))
            if rules["game"] == "baccarat":
                self.procedure(coup, table, of(events, "baccarat.coup_opened")[0], dealt_by)
                holders[table] = self.baccarat(coup, rules, events, holders.get(table, (None, "")))
            else:
                self.blackjack(coup, rules, events)
            self.payouts(coup, rules, events)
        return self.findings

    # ---- the record explains itself --------------------------------------

    def ruleset(self, e: Event) -> None:
        got = hashlib.sha256(e["content"].encode()).hexdigest()[:16]
        if got != e["digest"]:
            self.fail(e["table"], f"ruleset {e['name']}: sha256 of its content is {got}, not {e['digest']}")
        self.rulesets[e["digest"]] = json.loads(e["content"])

    # ---- shoes: commitment, order, burns, cut card -------------------------

    def shoe(self, shoe_id: str, events: list[Event]) -> None:
        shuffled, ended = of(events, "shoe.shuffled"), of(events, "shoe.ended")
        if not shuffled:
            self.fail(shoe_id, "no shuffle recorded")
            return
        sh = shuffled[0]
        out = sorted(of(events, "shoe.card_burned") + of(events, "shoe.card_drawn"), key=lambda e: e["position"])
        if [e["position"] for e in out] != list(range(len(out))):
            self.fail(shoe_id, "the cards leaving the shoe are not at consecutive positions from 0")
        burned = of(events, "shoe.card_burned")
        if burned:
            first = burned[0]
            due = (bac_value(first["card"]) or 10) if sh["burn_by_value"] else sh["burns_due"]
            want = 1 + due if sh["burn_by_value"] else due
            if (not first["face_up"] and sh["burn_by_value"]) or len(burned) != want:
                self.fail(shoe_id, f"{len(burned)} cards burned; the first card {first['card']} calls for {want}")
        cut = of(events, "shoe.cut_card_reached")
        if sh["cut_index"] is not None and cut and cut[0]["position"] != sh["cut_index"]:
            self.fail(shoe_id, f"the cut card came out at {cut[0]['position']}, it lies at {sh['cut_index']}")
        if sh["cut_index"] is not None and not cut and out and out[-1]["position"] >= sh["cut_index"]:
            self.fail(shoe_id, "cards were dealt from behind the cut card, and the cut card is not recorded")
        if not ended:
            return
        order, salt = ended[0]["order"], ended[0]["salt"]
        if hashlib.sha256(f"{salt}:{' '.join(order)}".encode()).hexdigest() != sh["commitment"]:
            self.fail(shoe_id, "the revealed order and salt do not hash to the commitment")
        if Counter(order) != Counter({r + s: sh["decks"] for r in RANKS for s in "SHDC"}):
            self.fail(shoe_id, f"the revealed order is not {sh['decks']} full decks")
        for e in out:
            if order[e["position"]] != e["card"]:
                self.fail(shoe_id, f"position {e['position']}: {e['card']} left the shoe, the order has "
                                   f"{order[e['position']]}")

    # ---- seating -------------------------------------------------------------

    def seating(self, coup: str, ev: list[Event], before: tuple[tuple[int, str], ...]) -> tuple[tuple[int, str], ...]:
        """Each book opens with the seating the table's last coup left; each wager is the seated player's
        own (or unnamed where nobody is seated), or a back bet by another player on a seated player's box."""
        opened = of(ev, "wager.book_opened")
        seated = {s: p for s, p in (opened[0].get("seated", []) if opened else [])}
        if tuple(sorted(seated.items())) != tuple(before):
            self.fail(coup, f"betting opened with {sorted(seated.items())} seated; the last coup left {list(before)}")
        for e in ev:
            if e["type"] == "wager.player_seated":
                seated[e["seat"]] = e["player"]
            elif e["type"] == "wager.player_left":
                seated.pop(e["seat"], None)
            elif e["type"] == "wager.placed":
                w, at = e["wager"], seated.get(e["wager"]["seat"], "")
                if w.get("back") and (not at or w["player"] == at):
                    self.fail(coup, f"a back bet by {w['player']} on seat {w['seat']}, where {at or 'nobody'} sits")
                if not w.get("back") and w.get("player", "") != at:
                    self.fail(coup, f"seat {w['seat']}'s own wager by {w.get('player')!r}, but {at or 'nobody'} sits")
        return tuple(sorted(seated.items()))

    # ---- baccarat ------------------------------------------------------------

    def procedure(self, coup: str, table: str, opened: Event, dealt_by: dict[str, tuple[int, str]]) -> None:
        """000 8.2, 001 8.5: the casino's choice; a coup dealt by another procedure
        than the coup before names the supervisor who directed it (recorded
        since the opening records ``in_force``)."""
        number = int(coup.rsplit("-", 1)[1])
        last = dealt_by.get(table)
        if last is not None and last[0] == number - 1 and "in_force" in opened:
            if opened["in_force"] != last[1]:
                self.fail(coup, f"opened with {opened['in_force']} in force; the coup before was dealt by {last[1]}")
            if opened["procedure"] != last[1] and not opened["supervisor"]:
                self.fail(coup, f"dealt by {opened['procedure']} after {last[1]}, and no supervisor directed it")
        dealt_by[table] = (number, opened["procedure"])

    def baccarat(self, coup: str, rules: dict[str, Any], ev: list[Event],
                 holding: tuple[int | None, str]) -> tuple[int | None, str]:
        """Tableau, faces, offers, 8.18, pick-up; returns who keeps the shoe into the next coup (seat, player)."""
        held, held_by = holding
        opened = of(ev, "baccarat.coup_opened")[0]
        procedure = opened["procedure"]
        wagers = of(ev, "baccarat.betting_closed")[0]["wagers"]
        seats: list[int] = rules["seats"]
        # 000 8.18: a player holding the shoe keeps it into the next coup, which is a Method C coup.
        if held is not None and (procedure != "method_c" or opened["shoe_holder"] != held):
            self.fail(coup, f"000 8.18: seat {held} held the shoe; the coup opened by {procedure} with holder "
                            f"{opened['shoe_holder']}")
        if held is None and opened["shoe_holder"] is not None:
            self.fail(coup, f"opened with seat {opened['shoe_holder']} holding a shoe nobody kept")
        if held_by and opened.get("shoe_holder_player", "") not in ("", held_by):
            self.fail(coup, f"000 8.18: {held_by} kept the shoe; the coup opened with {opened['shoe_holder_player']}")
        # Offers in the order the clauses give.
        for order in of(ev, "baccarat.offer_order"):
            want = self.offer_order(procedure, order["offer"], wagers, seats)
            if order["seats"] != want:
                self.fail(coup, f"{order['offer']} offered to {order['seats']} under {procedure}, the clauses give {want}")
        for kept in of(ev, "baccarat.holder_assigned"):
            if kept["clause"] == "000 8.18" and not any(w["seat"] == kept["seat"] for w in own(wagers)):
                self.fail(coup, f"000 8.15: seat {kept['seat']} kept the shoe with no wager in the coup")
            # 000 8.18: the shoe is the player's who accepted it; another player at his seat is offered it afresh.
            wagering = {w.get("player", "") for w in own(wagers) if w["seat"] == kept["seat"]} - {""}
            if kept["clause"] == "000 8.18" and held_by and wagering and held_by not in wagering:
                self.fail(coup, f"000 8.18: the shoe stayed with seat {kept['seat']}, where {sorted(wagering)} "
                                f"wager, though {held_by} accepted it")
        for given in of(ev, "baccarat.shoe_given_up"):
            if given["reason"] == "no_wager" and any(w["seat"] == given["seat"] for w in own(wagers)):
                self.fail(coup, f"seat {given['seat']} gave up the shoe for having no wager, and has one")
        dealt = of(ev, "baccarat.card_dealt")
        player = [d["card"] for d in dealt if d["hand"] == "player"]
        banker = [d["card"] for d in dealt if d["hand"] == "banker"]
        if [d["hand"] for d in dealt[:4]] != ["player", "banker", "player", "banker"]:
            self.fail(coup, "the first four cards do not go Player, Banker, Player, Banker")
        self.tableau(coup, player, banker, of(ev, "baccarat.coup_resulted"))
        self.faces(coup, procedure, ev, dealt)
        picked = of(ev, "baccarat.cards_picked_up")
        if not picked or picked[0]["cards"] != [d["card"] for d in dealt]:
            self.fail(coup, "the cards picked up are not the cards dealt, in the order dealt")
        return self.holder_after(coup, rules, ev, wagers)

    def offer_order(self, procedure: str, offer: str, wagers: list[Event], seats: list[int]) -> list[int]:
        if offer == "shoe" and procedure == "method_c":  # 000 8.15
            with_wager = {w["seat"] for w in own(wagers)}
            return counter_clockwise_from(seats, min(with_wager), with_wager) if with_wager else []
        if offer == "shoe":  # 000 8.25: highest wager on Banker or Player; equal wagers, lowest numbered seat first
            return by_stake(stakes_on(wagers, ("banker", "player")), sorted)
        stakes = stakes_on(wagers, (offer,))
        if procedure == "style_b":  # 001 8.9(a)-(c): equal wagers from the lowest numbered seat, counter-clockwise
            return by_stake(stakes, lambda tied: counter_clockwise_from(seats, min(tied), tied))
        # 000 8.5-8.8: equal highest wagers from the seat nearest the dealer's right, counter-clockwise
        return by_stake(stakes, lambda tied: counter_clockwise(seats, tied))

    def tableau(self, coup: str, player: list[str], banker: list[str], resulted: list[Event]) -> None:
        p2, b2 = bac_points(player[:2]), bac_points(banker[:2])
        want_p, want_b = 2, 2
        if p2 < 8 and b2 < 8:
            if p2 <= 5:
                want_p = 3
            if want_p == 2:
                want_b = 3 if b2 <= 5 else 2
            else:
                third = bac_value(player[2]) if len(player) > 2 else -1
                draws = {0: True, 1: True, 2: True, 3: third != 8, 4: 2 <= third <= 7, 5: 4 <= third <= 7,
                         6: third in (6, 7), 7: False}
                want_b = 3 if draws[b2] else 2
        if (len(player), len(banker)) != (want_p, want_b):
            self.fail(coup, f"Player drew to {len(player)} cards and Banker to {len(banker)}; "
                            f"the tableau gives {want_p} and {want_b}")
        if not resulted:
            self.fail(coup, "no result")
            return
        r = resulted[0]
        p, b = bac_points(player), bac_points(banker)
        winner = "tie" if p == b else "player" if p > b else "banker"
        pair = (len(player) > 1 and player[0][0] == player[1][0], len(banker) > 1 and banker[0][0] == banker[1][0])
        got = (r["winner"], r["player_points"], r["banker_points"], r["natural"], r["player_pair"], r["banker_pair"])
        want = (winner, p, b, p2 >= 8 or b2 >= 8, *pair)
        if got != want:
            self.fail(coup, f"result {got}, the cards give {want}")

    def faces(self, coup: str, procedure: str, ev: list[Event], dealt: list[Event]) -> None:
        """Method A and Style A deal face up (000 8.3.1, 001 8.6), Method B and Style B face down
        (8.5, 001 8.12); a player holding the shoe deals face down (8.19, 8.28); the dealer's third
        cards are face up. Every card is face up before the result."""
        fell_back = of(ev, "baccarat.procedure_fell_back")
        dealing = fell_back[0]["procedure"] if fell_back else procedure
        holder = next((h["seat"] for h in of(ev, "baccarat.holder_assigned") if h["offer"] == "shoe"), None)
        for i, d in enumerate(dealt):
            if dealing in ("method_c", "method_d") and holder is not None:
                want_up, by = False, holder
            else:
                want_up, by = (i >= 4 or dealing in ("method_a", "style_a")), None
            if (d["face_up"], d["by"]) != (want_up, by):
                self.fail(coup, f"card {i + 1} ({d['card']}) dealt face {'up' if d['face_up'] else 'down'} by "
                                f"{d['by']}; under {dealing} it is face {'up' if want_up else 'down'} by {by}")
        shown = {d["position"] for d in dealt if d["face_up"]}
        for e in of(ev, "baccarat.hand_exposed"):
            shown |= {d["position"] for d in dealt if d["hand"] == e["hand"]}
        for e in of(ev, "baccarat.cards_turned_over"):
            shown |= set(e["positions"])
        if shown != {d["position"] for d in dealt}:
            self.fail(coup, "cards left face down at the result")

    def holder_after(self, coup: str, rules: dict[str, Any], ev: list[Event],
                     wagers: list[Event]) -> tuple[int | None, str]:
        """000 8.18 read literally (the ruleset's default): the holder loses the shoe when any of his own
        wagers loses; Banker and Player wagers push on a tie."""
        fell_back = bool(of(ev, "baccarat.procedure_fell_back"))
        if of(ev, "baccarat.coup_opened")[0]["procedure"] != "method_c" or fell_back:
            return None, ""
        at = next((i for i in range(len(ev) - 1, -1, -1) if ev[i]["type"] == "baccarat.holder_assigned"
                   and ev[i]["offer"] == "shoe"), None)
        holder = None if at is None else ev[at]["seat"]
        if at is None or holder is None:
            return None, ""
        assigned = ev[at]
        r = of(ev, "baccarat.coup_resulted")[0]
        hits = {"player": r["winner"] != "banker", "banker": r["winner"] != "player",
                "tie": r["winner"] == "tie", "player_pair": r["player_pair"], "banker_pair": r["banker_pair"]}
        loses = any(not hits[w["bet"]] for w in own(wagers) if w["seat"] == holder)
        if rules.get("holder_loses_shoe", "own_wager") != "own_wager":
            return None, ""  # another reading: not checked here
        # What became of the shoe after it was last assigned (one given up before it, by a holder who
        # left the seat, is another player's).
        given = [g for g in of(ev[at:], "baccarat.shoe_given_up") if g["seat"] == holder]
        lost = [g for g in given if g["reason"] == "lost"]
        if loses != bool(lost):
            self.fail(coup, f"000 8.18: seat {holder}'s own wager {'lost' if loses else 'did not lose'}, and the "
                            f"shoe was {'' if lost else 'not '}given up as lost")
        return (None, "") if given else (holder, assigned.get("player", ""))

    # ---- blackjack -------------------------------------------------------------

    def blackjack(self, coup: str, rules: dict[str, Any], ev: list[Event]) -> None:
        seats: list[int] = rules["seats"]
        boxes = [s for s in seats if s in {w["seat"] for w in of(ev, "blackjack.betting_closed")[0]["wagers"]}]
        hands: dict[int, list[list[str]]] = {s: [[]] for s in boxes}
        split: dict[int, list[bool]] = {s: [False] for s in boxes}
        dealer: list[str] = []
        for e in ev:
            if e["type"] == "blackjack.card_dealt":
                (dealer if e["seat"] is None else hands[e["seat"]][e["hand"]]).append(e["card"])
            elif e["type"] == "blackjack.decision_taken" and e["action"] == "split":
                # A split hand's second card becomes a new hand just after it; the hands after it move up one.
                h = hands[e["seat"]]
                h.insert(e["hand"] + 1, [h[e["hand"]].pop()])
                split[e["seat"]][e["hand"]:e["hand"] + 1] = [True, True]
        hits_soft_17 = rules["dealer_hits_soft_17"]
        for i in range(2, len(dealer) + 1):  # the dealer draws to 16 and stands on 17 (soft 17: the setting)
            t, soft = bj_total(dealer[:i])
            must = t < 17 or (t == 17 and soft and hits_soft_17)
            if must != (i < len(dealer)):
                self.fail(coup, f"the dealer {'stood' if must else 'drew'} on {dealer[:i]}")
        resulted = of(ev, "blackjack.coup_resulted")
        if not resulted:
            self.fail(coup, "no result")
            return
        dealer_bj = bj_blackjack(dealer, False)
        d = bj_total(dealer)[0]
        got = {(h["seat"], h["hand"]): h["outcome"] for h in resulted[0]["hands"]}
        for seat in boxes:
            for i, cards in enumerate(hands[seat]):
                p = bj_total(cards)[0]
                if bj_blackjack(cards, split[seat][i]):
                    want = "push" if dealer_bj else "blackjack"
                elif dealer_bj or p > 21:
                    want = "lose"
                else:
                    want = "win" if d > 21 or p > d else "push" if p == d else "lose"
                if got.get((seat, i)) != want:
                    self.fail(coup, f"seat {seat} hand {i} {cards} against {dealer}: {got.get((seat, i))}, "
                                    f"the cards give {want}")
        players = [c for s in reversed(boxes) for h in hands[s] for c in h]  # from the dealer's right
        want_pickup = dealer + players if rules["pickup"] == "dealer_first" else players + dealer
        picked = of(ev, "blackjack.cards_picked_up")
        if not picked or picked[0]["cards"] != want_pickup:
            self.fail(coup, f"picked up {picked[0]['cards'] if picked else None}, the order is {want_pickup}")

    # ---- payouts -----------------------------------------------------------------

    def payouts(self, coup: str, rules: dict[str, Any], ev: list[Event]) -> None:
        settled = of(ev, "settlement.coup_settled")
        if not settled:
            self.fail(coup, "not settled")
            return
        got = sorted((p["seat"], p["bet"], p.get("hand", 0), p["stake"], p["returned"], p.get("player", ""))
                     for p in settled[0]["payouts"])
        want = sorted(self.baccarat_pays(rules, ev) if rules["game"] == "baccarat" else self.blackjack_pays(rules, ev))
        if got != want:
            self.fail(coup, f"paid {got}, the rules pay {want}")

    @staticmethod
    def baccarat_pays(rules: dict[str, Any], ev: list[Event]) -> list[tuple[int, str, int, int, int, str]]:
        r = of(ev, "baccarat.coup_resulted")[0]
        out = []
        for w in of(ev, "baccarat.betting_closed")[0]["wagers"]:
            bet, amount = w["bet"], w["amount"]
            if bet in ("player", "banker"):
                if r["winner"] == "tie":
                    back = amount
                elif r["winner"] == bet:
                    win = amount if bet == "player" else _round(amount * (10000 - rules["commission_bp"]), 10000,
                                                                rules["commission_rounding"])
                    back = amount + win
                else:
                    back = 0
            elif bet == "tie":
                back = amount * (1 + rules["tie_pays"]) if r["winner"] == "tie" else 0
            else:
                back = amount * (1 + rules["pair_pays"]) if r[bet] else 0
            out.append((w["seat"], bet, 0, amount, back, w.get("player", "")))
        return out

    @staticmethod
    def blackjack_pays(rules: dict[str, Any], ev: list[Event]) -> list[tuple[int, str, int, int, int, str]]:
        r = of(ev, "blackjack.coup_resulted")[0]
        num, den = rules["blackjack_pays"]
        # Each payout names the player of its box: the box's own wager's, else who was seated there.
        seated: dict[int, str] = {}
        for e in ev:
            if e["type"] == "wager.book_opened":
                seated = {s: p for s, p in e.get("seated", [])}
            elif e["type"] == "wager.player_seated":
                seated[e["seat"]] = e["player"]
            elif e["type"] == "wager.player_left":
                seated.pop(e["seat"], None)
        named = {w["seat"]: w["player"] for c in of(ev, "wager.book_closed") for w in c["wagers"]
                 if w.get("player") and not w.get("back")}

        def player(seat: int) -> str:
            return str(named.get(seat) or seated.get(seat, ""))

        out = []
        for h in r["hands"]:
            stake = h["stake"]
            back = {"blackjack": stake + _round(stake * num, den, rules["payout_rounding"]), "win": 2 * stake,
                    "push": stake}.get(h["outcome"], 0)
            if h["outcome"] == "lose" and r["dealer_blackjack"] and rules["dealer_blackjack_takes"] == "original_bets":
                back = stake - h["original"]
            out.append((h["seat"], "box", h["hand"], stake, back, player(h["seat"])))
        for seat, amount in r["insurance"]:
            out.append((seat, "insurance", 0, amount, 3 * amount if r["dealer_blackjack"] else 0, player(seat)))
        return out


def _round(numerator: int, denominator: int, rounding: str) -> int:
    q, rem = divmod(numerator, denominator)
    if rem == 0 or rounding == "down":
        return q
    return q + 1 if rounding == "up" or 2 * rem >= denominator else q


def check(record: list[tuple[str, int, list[Event]]]) -> list[str]:
    return Checker(record).run()
