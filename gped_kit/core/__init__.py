"""Pure numerics of GPED: SGLD (Eq. 7), Adam, likelihoods, targets g, estimators U (Eqs. 9-10),
losses and regularisers (Eqs. 8, 11), metrics and the uncertainty decomposition. Nothing here
imports from the rest of the kit."""
