"""One kops execution per cluster: a cluster-wide lock that names its holder.

The lock belongs to an *execution* (not to a process): it is taken by ``execute`` and released
when the execution ends (complete, cancelled or failed), so a killed kops keeps its execution
locked until ``resume``/``verify``/``cancel`` finish it.

- Always (ZooKeeper and KRaft clusters alike, with or without ``--zookeeper``): creating the
  topic ``__kops_lock`` is the atomic step (CreateTopics fails with TOPIC_ALREADY_EXISTS for the
  second caller); the holder's identity is the record ``lock`` in ``__kops_journal``.
- With ``--zookeeper`` also the persistent znode ``/kops/reassign/lock`` (atomic create), so
  tools that only look at ZooKeeper see it too.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kops.errors import ClusterError, KopsError
from kops.ops import failpoints
from kops.ops.journal import ZK_ROOT, TopicStore, now_iso

LOCK_TOPIC = "__kops_lock"
#: how long a kops that only looks at the lock waits for a lock topic without a holder record to
#: get one or to go (:meth:`ClusterLock.settled_holder`)
HALF_TAKEN_WAIT_S = 10.0
ZK_LOCK = f"{ZK_ROOT}/lock"


class LockHeld(KopsError):
    """Another execution holds the cluster lock (exit 3: step aside, try later)."""

    exit_code = 3

    def __init__(self, holder: dict[str, Any] | None):
        self.holder = holder or {}
        who = describe_holder(self.holder)
        super().__init__(
            f"another kops execution is in progress on this cluster: {who}. Use `kops reassign "
            "verify`, `resume` or `cancel` to finish it first.",
        )


def describe_holder(h: dict[str, Any]) -> str:
    if not h:
        return "unknown holder (the lock is being taken or its record is missing)"
    o = h.get("owner", {})
    return (
        f"execution {h.get('execution_id', '?')} started {h.get('acquired_at', '?')} by "
        f"{o.get('user', '?')}@{o.get('host', '?')} (pid {o.get('pid', '?')})"
    )


class ClusterLock:
    def __init__(self, conn):
        self.conn = conn
        self.zk_mode = bool(getattr(conn, "zookeeper", None))
        #: the execution this object took the lock for (its release need not read the holder)
        self._acquired: str | None = None

    # -- ZooKeeper ----------------------------------------------------------------------------
    def _zk_acquire(self, record: dict[str, Any]) -> None:
        from kazoo.exceptions import NodeExistsError

        zk = self.conn.zk()
        try:
            zk.retry(zk.create, ZK_LOCK, json.dumps(record).encode(), makepath=True)
        except NodeExistsError:
            raise LockHeld(self.holder()) from None

    def _zk_holder(self) -> dict[str, Any] | None:
        from kazoo.exceptions import NoNodeError

        zk = self.conn.zk()
        try:
            data, _ = zk.retry(zk.get, ZK_LOCK)
        except NoNodeError:
            return None
        return json.loads(data.decode()) if data else {}

    def _zk_release(self, execution_id: str) -> None:
        from kazoo.exceptions import NoNodeError

        zk = self.conn.zk()
        try:
            data, stat = zk.retry(zk.get, ZK_LOCK)
        except NoNodeError:
            return
        h = json.loads(data.decode()) if data else {}
        if h.get("execution_id") == execution_id:
            zk.retry(zk.delete, ZK_LOCK, version=stat.version)

    # -- topics ---------------------------------------------------------------------------------
    def _topic_acquire(self, record: dict[str, Any]) -> None:
        from confluent_kafka.admin import NewTopic

        store = TopicStore(self.conn)
        store.ensure_topic()
        deadline = time.monotonic() + max(self.conn.timeout_s, 10.0)
        broken = False
        while True:
            try:
                self.conn.to_controller(lambda admin: admin.create_topics(
                    [NewTopic(LOCK_TOPIC, 1, 1, config={"retention.ms": "60000"})],
                    request_timeout=self.conn.timeout_s,
                )[LOCK_TOPIC], f"create topic {LOCK_TOPIC}")
                break
            except ClusterError as e:
                if "TOPIC_ALREADY_EXISTS" not in e.message.upper():
                    raise
                store._cache().pop(store.topic, None)  # read afresh: someone else wrote it
                holder = self._topic_holder(store)
                if holder:
                    raise LockHeld(holder) from None
                if time.monotonic() > deadline:
                    if broken:
                        raise LockHeld(holder) from None
                    # still no holder record after the deadline: a kops was killed between
                    # creating the lock topic and recording itself (it had not journaled,
                    # throttled or submitted anything yet). Break that half-taken lock once.
                    self._delete_lock_topic()
                    broken = True
                    deadline = time.monotonic() + max(self.conn.timeout_s, 10.0)
                    continue
                # the topic exists but no holder is recorded: a release in progress (topic
                # deletion is asynchronous) or an acquire in progress; look again shortly
                time.sleep(0.5)
        failpoints.reach("lock.topic-created")
        store.put_raw("lock", json.dumps(record).encode())

    def _topic_record(self, store: TopicStore | None = None) -> dict[str, Any] | None:
        """The record ``lock`` in the journal: a holder's, or a released one (``released_at``)."""
        store = store or TopicStore(self.conn)
        v = store.read_all().get("lock")
        return json.loads(v.decode()) if v else None

    def _topic_holder(self, store: TopicStore | None = None) -> dict[str, Any] | None:
        """The holder recorded for the lock topic, None when there is none (never recorded, or
        released: the topic's deletion follows the release record)."""
        rec = self._topic_record(store)
        return None if rec is None or rec.get("released_at") else rec

    def topic_exists(self) -> bool:
        return self.conn.topic_metadata(LOCK_TOPIC, "look for the lock topic")[1]

    def _topic_release(self, execution_id: str) -> None:
        store = TopicStore(self.conn)
        if self._acquired != execution_id:  # taken by another process: is it still this one's?
            h = self._topic_holder(store)
            if h and h.get("execution_id") != execution_id:
                return
        # a "released" record, not a tombstone: a kops that looks while the topic's deletion is
        # still under way (seconds on a busy ZooKeeper-mode controller) sees the lock is free
        # at once instead of waiting for the topic to go (see holder())
        store.put_raw("lock", json.dumps({"execution_id": execution_id, "released_at": now_iso()}).encode())
        self._delete_lock_topic()

    def _delete_lock_topic(self) -> None:
        """Delete the lock topic. On ZooKeeper clusters the deletion completes asynchronously
        (0.1-0.5 s later, 10 s and more on a busy controller); kops does not wait for it: the
        holder record already says released, lookers take the lock as free, and an acquire
        meanwhile finds the topic without a holder and retries every 0.5 s (see
        :meth:`_topic_acquire`), so only a kops that starts an execution at that moment waits,
        not every execution at its end."""
        try:
            self.conn.to_controller(
                lambda admin: admin.delete_topics([LOCK_TOPIC], request_timeout=self.conn.timeout_s)[LOCK_TOPIC],
                f"delete topic {LOCK_TOPIC}")
        except ClusterError as e:
            if "UNKNOWN_TOPIC" not in e.message.upper():
                raise

    # -- interface --------------------------------------------------------------------------
    def acquire(self, execution_id: str, owner: dict[str, Any]) -> dict[str, Any]:
        record = {"execution_id": execution_id, "owner": owner, "acquired_at": now_iso()}
        self._topic_acquire(record)
        if self.zk_mode:
            try:
                self._zk_acquire(record)
            except BaseException:
                self._topic_release(execution_id)
                raise
        # no other kops takes it from a live holder (see kops.ops.reassign.refuse_if_active):
        # it stays this execution's until released
        self._acquired = execution_id
        return record

    def holder(self) -> dict[str, Any] | None:
        """The holder's record, ``{}`` when locked by an unknown holder, None when free.

        A lock topic with a released record is free (its deletion is under way); a lock topic
        with no record at all is taken by an unknown holder (an acquire under way, or a kops
        killed between creating the topic and recording itself)."""
        rec = self._topic_record()
        if rec is not None and rec.get("released_at"):
            h = None
        elif rec is None and self.topic_exists():
            h = {}
        else:
            h = rec
        if self.zk_mode:
            zh = self._zk_holder()
            if zh is not None and not h:
                return zh
        return h

    def settled_holder(self, timeout_s: float = HALF_TAKEN_WAIT_S) -> dict[str, Any] | None:
        """:meth:`holder` for a kops that only looks (it takes no lock): a lock topic without any
        record (``{}``) is an acquire under way (the record follows the topic within moments) or
        a release by a kops older than the "released" record (a tombstone), so look again every
        0.25 s until a record shows or the topic goes, at most ``timeout_s``; still without a
        record then, ``{}``: an unknown holder."""
        from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

        def look() -> dict[str, Any] | None:
            store = TopicStore(self.conn)
            store._cache().pop(store.topic, None)  # read afresh
            return self.holder()

        return Retrying(retry=retry_if_result(lambda h: h == {}), stop=stop_after_delay(timeout_s),
                        wait=wait_fixed(0.25), retry_error_callback=lambda state: state.outcome.result())(look)

    def release(self, execution_id: str) -> None:
        """Release if ``execution_id`` holds the lock (never someone else's)."""
        if self.zk_mode:
            self._zk_release(execution_id)
        self._topic_release(execution_id)
        self._acquired = None

    def update_owner(self, execution_id: str, owner: dict[str, Any]) -> None:
        """``resume`` takes over an execution: record the new owner in the lock."""
        record = {"execution_id": execution_id, "owner": owner, "acquired_at": now_iso()}
        TopicStore(self.conn).put_raw("lock", json.dumps(record).encode())
        if self.zk_mode:
            zk = self.conn.zk()
            from kazoo.exceptions import NoNodeError

            try:
                zk.retry(zk.set, ZK_LOCK, json.dumps(record).encode())
            except NoNodeError:
                zk.retry(zk.create, ZK_LOCK, json.dumps(record).encode(), makepath=True)
