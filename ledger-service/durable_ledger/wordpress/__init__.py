"""WordPress: the REST client for one site (client.py) and the publishing proxy (proxy/).
The must-use plugin's source is ledger-service/wordpress/."""
