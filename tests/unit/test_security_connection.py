"""ZooKeeper credentials, error mapping (authorization / authentication) and redaction: no cluster."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

import pytest

from kops.cli.common import GlobalOptions, ZookeeperAuthOpt, make_context
from kops.cluster.config import ClientConfig, ZookeeperAuth
from kops.cluster.connection import (
    AuthenticationError,
    Connection,
    is_authentication_error,
    is_authorization_error,
)
from kops.cluster.redact import redact
from kops.errors import AuthorizationError, BadInput, ClusterError


def _user_config(tmp_path, user="kops-user", pw="Us3r-Secret-Pw"):
    f = tmp_path / "user.properties"
    f.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
        f'password="{pw}";\nssl.truststore.type=PEM\nssl.truststore.location={tmp_path}/ca.pem\n'
    )
    return f


def test_zookeeper_auth_file(tmp_path):
    f = tmp_path / "zk.properties"
    f.write_text("# creds\nusername=kafka\npassword=Zk-S3cret-Value\n")
    auth = ZookeeperAuth.load(str(f))
    assert auth.sasl_options() == {"mechanism": "DIGEST-MD5", "username": "kafka", "password": "Zk-S3cret-Value"}
    assert "Zk-S3cret-Value" not in repr(auth)
    assert "Zk-S3cret-Value" not in redact("login kafka:Zk-S3cret-Value failed")
    assert ZookeeperAuth.load(None) is None


@pytest.mark.parametrize("text,match", [
    ("username=kafka\n", "username=... and password=..."),
    ("password=x-y-z-w\n", "username=... and password=..."),
    ("username=kafka\npassword=abcdef\nmechanism=GSSAPI\n", "mechanism 'GSSAPI'"),
])
def test_zookeeper_auth_file_errors(tmp_path, text, match):
    f = tmp_path / "zk.properties"
    f.write_text(text)
    with pytest.raises(BadInput, match=match):
        ZookeeperAuth.load(str(f))


def test_zookeeper_auth_file_missing(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        ZookeeperAuth.load(str(tmp_path / "nope"))


def test_connection_carries_zookeeper_auth(tmp_path):
    f = tmp_path / "zk.properties"
    f.write_text("username=kafka\npassword=Zk-S3cret-Value\n")
    c = Connection.from_options(bootstrap_server="127.0.0.1:9092", command_config=None, zookeeper="127.0.0.1:2181",
                                timeout_s=5, zookeeper_auth_file=str(f))
    assert c.zookeeper_auth.username == "kafka"
    assert "Zk-S3cret-Value" not in repr(c)
    # backward compatible: the old keyword set still works
    c = Connection.from_options(bootstrap_server="127.0.0.1:9092", command_config=None, zookeeper=None, timeout_s=5)
    assert c.zookeeper_auth is None


def test_authorization_errors_name_operation_resource_and_principal(tmp_path):
    from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    c = Connection.from_options(bootstrap_server="127.0.0.1:9092", command_config=str(_user_config(tmp_path)),
                                zookeeper=None, timeout_s=5)
    e = c.map_error(ClusterAuthorizationFailedError("Request 'AlterPartitionReassignmentsRequest(...)' long text"),
                    "alter partition reassignments of orders-0")
    assert isinstance(e, AuthorizationError) and e.exit_code == 1
    assert e.message.startswith("alter partition reassignments of orders-0: not authorized on the cluster as "
                                "SCRAM-SHA-512 user 'kops-user' over SASL_SSL")
    assert "ClusterAuthorizationFailedError (error 31)" in e.message and "long text" not in e.message
    e = c.map_error(TopicAuthorizationFailedError(), "produce to orders")
    assert isinstance(e, AuthorizationError) and e.message.startswith("produce to orders: not authorized on the topic")
    e = c.map_error(TopicAuthorizationFailedError(), "describe configs of topic orders")  # resource already named
    assert e.message.startswith("describe configs of topic orders: not authorized as ")
    assert "Us3r-Secret-Pw" not in e.message


def test_librdkafka_error_mapping(tmp_path):
    from confluent_kafka import KafkaError, KafkaException

    c = Connection.from_options(bootstrap_server="127.0.0.1:9092", command_config=str(_user_config(tmp_path)),
                                zookeeper=None, timeout_s=5)
    authz = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."))
    assert is_authorization_error(authz) and not is_authentication_error(authz)
    e = c.map_error(authz, "describe configs of topic t")
    assert isinstance(e, AuthorizationError) and "TOPIC_AUTHORIZATION_FAILED" in e.message
    authn = KafkaException(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials"))
    assert is_authentication_error(authn)
    e = c.map_error(authn, "describe cluster")
    assert isinstance(e, AuthenticationError) and "--command-config" in e.message and e.exit_code == 1
    other = c.map_error(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "x")), "describe topic t")
    assert type(other) is ClusterError


def test_wait_ends_at_once_after_a_failed_login(tmp_path):
    from concurrent.futures import Future

    c = Connection.from_options(bootstrap_server="127.0.0.1:9092", command_config=str(_user_config(tmp_path)),
                                zookeeper=None, timeout_s=30)
    c._auth_error = "_AUTHENTICATION: SASL authentication error"
    with pytest.raises(AuthenticationError, match="authentication to the cluster .* failed as SCRAM-SHA-512 user"):
        c.wait(Future(), "describe cluster")


def test_kazoo_no_auth_is_an_authorization_error(tmp_path):
    from kazoo.exceptions import NoAuthError

    f = tmp_path / "zk.properties"
    f.write_text("username=kafka\npassword=Zk-S3cret-Value\n")
    c = Connection.from_options(bootstrap_server=None, command_config=None, zookeeper="127.0.0.1:2181", timeout_s=5,
                                zookeeper_auth_file=str(f))
    e = c.map_error(NoAuthError(), "create /admin/reassign_partitions")
    assert isinstance(e, AuthorizationError)
    assert e.message == ("create /admin/reassign_partitions: not authorized in ZooKeeper as ZooKeeper user 'kafka' "
                         "(NoAuthError)")


def test_make_context_zookeeper_auth_sources(monkeypatch, tmp_path):
    seen = {}
    app = typer.Typer()

    @app.callback()
    def root(ctx: typer.Context, zookeeper_auth_file: ZookeeperAuthOpt = None) -> None:
        ctx.obj = GlobalOptions(zookeeper_auth_file=zookeeper_auth_file)

    @app.command()
    def cmd(ctx: typer.Context) -> None:
        seen["file"] = make_context(ctx).zookeeper_auth_file  # old call form: no new keyword

    @app.command()
    def cmd2(ctx: typer.Context) -> None:
        seen["file"] = make_context(ctx, zookeeper_auth_file="/own").zookeeper_auth_file

    r = CliRunner()
    monkeypatch.delenv("KOPS_ZOOKEEPER_AUTH_FILE", raising=False)
    assert r.invoke(app, ["--zookeeper-auth-file", "/g", "cmd"]).exit_code == 0 and seen["file"] == "/g"
    assert r.invoke(app, ["cmd"]).exit_code == 0 and seen["file"] is None
    monkeypatch.setenv("KOPS_ZOOKEEPER_AUTH_FILE", "/env")
    assert r.invoke(app, ["cmd"]).exit_code == 0 and seen["file"] == "/env"
    assert r.invoke(app, ["cmd2"]).exit_code == 0 and seen["file"] == "/own"


def test_handle_errors_names_unexpected_authorization_errors_and_redacts(tmp_path, capsys):
    from kafka.errors import ClusterAuthorizationFailedError

    from kops.cli.common import handle_errors

    ClientConfig.load(str(_user_config(tmp_path, pw="Leaky-Pass-4242")))  # registers the secret

    @handle_errors
    def boom() -> None:
        raise ClusterAuthorizationFailedError("as kops-user with Leaky-Pass-4242")

    with pytest.raises(typer.Exit) as ei:
        boom()
    assert ei.value.exit_code == 1
    err = capsys.readouterr().err
    assert "not authorized" in err and "Leaky-Pass-4242" not in err


def test_kafka_python_warm_up_hands_over_its_client_or_its_error(monkeypatch):
    """Connection.warm_up creates kafka-python's client in the background; kp_admin() waits
    for it and uses it, or raises the warm-up's error once (a later call tries again)."""
    import threading

    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.errors import ClusterError

    release, entered = threading.Event(), threading.Event()
    made = []

    def slow_client(self):
        entered.set()
        release.wait(5)
        made.append(threading.current_thread().name)
        return "client"

    monkeypatch.setattr(Connection, "_new_kp_admin", slow_client)
    c = Connection("127.0.0.1:1", ClientConfig.load(None), timeout_s=1)
    c.warm_up()
    assert entered.wait(5)
    c.warm_up()  # a second call starts nothing
    release.set()
    assert c.kp_admin() == "client" and c.kp_admin() == "client"
    assert made == ["kops-kafka-python-warm-up"]

    calls = []

    def failing(self):
        calls.append(1)
        if len(calls) == 1:
            raise ClusterError("cannot reach the cluster at 127.0.0.1:1 within 1 s")
        return "second"

    monkeypatch.setattr(Connection, "_new_kp_admin", failing)
    c = Connection("127.0.0.1:1", ClientConfig.load(None), timeout_s=1)
    c.warm_up()
    for _ in range(500):  # until the warm-up thread has tried
        if calls:
            break
        threading.Event().wait(0.01)
    with pytest.raises(ClusterError, match="cannot reach"):
        c.kp_admin()  # the warm-up's failure, not a second wait
    assert len(calls) == 1
    assert c.kp_admin() == "second"
