"""Console sign-ins held server-side (store/console_sessions.py): a new table, no change to
existing ones. Signed-in cookies of earlier releases held the token's hash and are not read any
more: everyone signs in once again after the upgrade."""

from ..console_sessions import ConsoleSession

VERSION = 5
NAME = "console_sessions"


def up(schema):
    schema.create_tables([ConsoleSession])
