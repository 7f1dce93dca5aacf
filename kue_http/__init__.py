"""kue_http: the Flask app factory, JSON API and dashboard (to come)."""
