"""SIA_VC (Figure 6): virtual start times, the logical resource-time plan and its compiled pass."""
