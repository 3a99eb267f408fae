"""WordPress: the REST client for one site (client.py), the publishing proxy (proxy/) and the
durable-ops plugin's source (durable-ops.php, uninstall.php, readme.txt), shipped in the wheel as
package data: an installed ledger carries the exact plugin it was tested with."""
