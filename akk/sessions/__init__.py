"""Sessions owned by task, scope and role: their facts and the pure policy over them."""
