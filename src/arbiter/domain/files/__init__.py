"""Files the workers fetch or send: task PGNs, nets and opening books."""
