"""Pure domain code: models, schedules and decisions. Nothing here touches AWS or reads the clock."""
