//! `hawser server`: the controllers, the status engine, `/metrics`, `/livez` and `/readyz`.
