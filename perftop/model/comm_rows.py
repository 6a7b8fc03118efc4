"""What the snapshot says about collectives: per rank, the straggler, and hangs.

Plain frozen rows (the figures come from :mod:`perftop.model.comm`). Times are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass


def rank_name(rank: int | None, pid: int | None, host: str = "") -> str:
    """A rank as the screens and hints name it: ``rank 1 on node-b``, or its pid without a
    rank; the host where one is known."""
    name = f"rank {rank}" if rank is not None else f"pid {pid}"
    return f"{name} on {host}" if host else name


@dataclass(frozen=True, slots=True)
class CollSite:
    """Where some of a rank's collectives of one op came from (perftop/model/comm_sites.py):
    the ``phase`` of the step (forward, backward, optimizer, data, step, between; "" when
    unknown), the ``torch.distributed`` function called ("" from C++: DDP's reducer), and
    the user's ``line`` (``file:line function``; "" when no user frame was on the stack)."""

    phase: str
    call: str
    line: str
    count: int
    bytes: int


@dataclass(frozen=True, slots=True)
class CollRow:
    """One kind of collective of one rank: ``op`` in process group ``pg``."""

    pg: str
    op: str
    count: int
    bytes: int  # input bytes, all calls together
    wait_p50_s: float | None  # median time this rank waited for the last rank to arrive
    training_thread: bool  # launched from the training thread (else a library's thread)
    sites: tuple[CollSite, ...] = ()  # where they came from, the most frequent first


@dataclass(frozen=True, slots=True)
class RankComm:
    """A rank's communication. ``wait_s`` is its median per step of time its training
    thread had to wait for other ranks to arrive (exposed); ``overlap_s`` the median per step
    of waiting that ran while it went on launching work (overlapped with compute)."""

    pid: int
    rank: int | None
    host: str
    collectives: tuple[CollRow, ...] = ()
    steps: int = 0  # steps with collectives matched across ranks
    wait_s: float | None = None
    overlap_s: float | None = None
    exposed_share: float | None = None  # wait_s over the rank's median step
    # the rank it waited for most: in the most steps (one long hang does not outweigh a
    # straggler's every step), by the wait on a tie
    waited_for: int | None = None
    lost: int = 0  # records the recorder's ring overwrote before they were read


@dataclass(frozen=True, slots=True)
class CommStraggler:
    """The rank the others wait for at the collectives, by who arrives last."""

    rank: int | None
    pid: int
    host: str
    wait_s: float  # the others' median exposed wait per step, for this rank
    step_s: float  # the median step over ranks
    last_share: float  # of the collectives matched, the share it arrived last at
    wait_share: float = 0.0  # of all the ranks' exposed wait, the share that was for it


@dataclass(frozen=True, slots=True)
class HangRank:
    """One rank of a hung collective's group: where it is."""

    rank: int | None
    pid: int
    entered: bool
    op: str = ""  # the op it entered at this sequence id ("" when it did not)
    line: str = ""  # a waiting rank's user line
    last_seq: int | None = None  # a missing rank's last collective in this group
    last_op: str = ""
    host: str = ""  # its node (a collector's; "" on one machine)

    @property
    def label(self) -> str:
        return rank_name(self.rank, self.pid, self.host)


@dataclass(frozen=True, slots=True)
class HangRow:
    """A collective that waited far past its usual time, or a desync (ranks in different
    collectives at one sequence id)."""

    pg: str
    seq: int
    op: str
    sizes: str
    t_created: float
    waited_s: float
    threshold_s: float
    ranks: tuple[HangRank, ...] = ()
    desync: bool = False
    ongoing: bool = True

    @property
    def missing(self) -> tuple[HangRank, ...]:
        return tuple(r for r in self.ranks if not r.entered)

    @property
    def words(self) -> str:
        """One line: the TUI's notice, the text report."""
        if self.desync:
            ops = ", ".join(f"rank {r.rank}: {r.op}" for r in self.ranks if r.entered)
            return f"desync at {self.pg} seq {self.seq}: ranks in different collectives ({ops})"
        miss = ", ".join(rank_name(r.rank, r.pid) for r in self.missing)
        who = f"; not entered: {miss}" if miss else ""
        return f"{self.op} {self.pg} seq {self.seq} has waited {self.waited_s:.0f} s{who}"


@dataclass(frozen=True, slots=True)
class CommStats:
    ranks: tuple[RankComm, ...] = ()
    straggler: CommStraggler | None = None
    hangs: tuple[HangRow, ...] = ()
    note: str = ""  # why no collectives are read (the recorder is off), "" otherwise
