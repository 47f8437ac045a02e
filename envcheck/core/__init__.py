"""Result model, check registry, isolation and the run loop."""
