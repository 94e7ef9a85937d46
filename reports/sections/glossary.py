""""How to read this report": every term the tables and figures use, in the order a reader meets them."""
from __future__ import annotations

# "How to read this report": every term the tables and figures use, in the order a reader meets them
GLOSSARY = (
    ("claim", "the (ε, δ)-DP guarantee the mechanism states for one round of one client's update (its unit and "
              "neighbouring relation are in the claim details); \"claimed over the rounds run\" composes it over "
              "the rounds, and its check recomputes that from the run's own client sampling (violated: the "
              "accountant understates it); \"accountant\" names the accountant that composed it and, where that is "
              "not the one asked for, why"),
    ("flags", "what the toolkit found about a claim without testing it: claim-exceeded (the noise really added has a "
              "larger ε than claimed), vacuous (it holds with no noise at all), no-privacy, trusted-server, "
              "reveals-norm, paper-compat (a paper's number reproduced its way)"),
    ("verdict", "violated: a test refuted the claim (decisive: Bonferroni-adjusted p below 1e-4; marginal: refuted "
                "at the audit's confidence, not far beyond; analytic: refuted by computing the ε of the noise really "
                "added, or by the accounting check); consistent: tests that could have refuted it did not; "
                "inconclusive: no test had the power to; vacuous claim: the claim bounds nothing the tests measure; "
                "no claim: the mechanism claims no privacy. A setting's headline verdict is the worst over all its "
                "tests"),
    ("decided by", "the test whose verdict is the headline (among equally bad ones, the smallest p-value), and the "
                   "number of tests the setting ran"),
    ("certified ε lower bound", "an ε that the mechanism is proven to exceed (unless a false alarm of the audit's "
                                "family-wise confidence): one-sided Clopper-Pearson bounds on a distinguishing "
                                "test's error rates on outputs held out from every choice; the summary shows the "
                                "strongest of the setting's tests and names it"),
    ("cap", "the largest bound a perfect test could certify with these trials: a bound at the cap means the two "
            "inputs were told apart every time, and more trials would raise it"),
    ("worst pair", "the neighbouring pair of inputs on which the distinguishing test was judged, chosen by the "
                   "worst-pair search on outputs not used for the bound"),
    ("adaptive test", "a distinguishing test aimed at a claim's blind spot (a side value sent in clear, an overloaded "
                      "quantizer, a protocol's later messages), judged in the same family"),
    ("identification, M, ReRo", "the informed adversary knows M real candidate examples (M - 1 besides the "
                                "target), sees the view the claim covers of the target's update (the server's, or "
                                "the aggregate with the other clients' updates known), and picks one; "
                                "reconstruction robustness (ReRo, Balle, Cherubin & Hayes 2022) bounds the success "
                                "of every such attack by what the claim allows; guessing succeeds with 1/M"),
    ("one-run canary audit", "m canaries, each included with probability 1/2, all in one run (Steinke, Nasr & "
                             "Jagielski 2023): the auditor guesses the inclusion of the k canaries it is surest of "
                             "and certifies ε from the v it got right (Steinke et al.'s binomial bound, or the "
                             "f-DP test of Mahloujifar, Melis & Chaudhuri 2025, which refutes the claim's whole "
                             "trade-off curve: the verdict; its ε bound is that of the refuted (ε, δ) curve, valid "
                             "for any mechanism, and beside it the ε of the least private refuted curve of the "
                             "claim's family, the paper's number, a bound only if the mechanism's curve is in "
                             "that family). k is fixed before the bits are read (\"claim\": the k that "
                             "would certify most at the claim; \"grid\": m, m/2, m/4, m/8 with Bonferroni). In an FL "
                             "run the canaries are canary clients (Andrew et al. 2024) and the claim judged is the "
                             "whole run's: composed over the rounds, amplified by client sampling"),
    ("trade-off curve (f-DP)", "f(α), the least type II error of any test between neighbouring inputs at type I "
                               "error α (Dong, Roth & Su 2022); μ-GDP for Gaussian noise, Laplace's own curve, the "
                               "privacy profile of a sampled composed run, or the (ε, δ) curve of a claim without "
                               "one; no attack can have TPR above 1 - f(FPR)"),
    ("membership inference", "the game of the membership section: the records tested (each in some client's data "
                             "or not) or the clients tested (each in the federation or not) are members by fair coins, "
                             "and an attack guesses which from the final global model; the loss attack (Yeom et al. "
                             "2018) thresholds each record's loss, with no reference runs"),
    ("reference runs", "runs of the same config on re-drawn memberships, trained beside the target run: for each "
                       "record tested, some trained with it and some without, they show how its score moves with "
                       "membership; in the pooled ROC each run is taken as the target in turn, the others its "
                       "references"),
    ("LiRA", "the likelihood-ratio attack (Carlini et al. 2022): Gaussians fitted to a record's logit-scaled "
             "confidence in the reference runs with and without it; online, the score is the log likelihood ratio "
             "of the target's confidence under the two; offline (the runs without it only), -log of the chance that "
             "a run without it is as confident"),
    ("RMIA", "the relative membership inference attack (Zarifzadeh et al. 2024): the share of population records "
             "(trained on by no run) that the record beats in likelihood ratio, each ratio the target model's "
             "probability of the true label over its mean in the reference runs"),
    ("TPR at low FPR", "the share of members an attack flags (true-positive rate) at a threshold that flags at most "
                       "0.1 % or 1 % of non-members (false-positive rate), with a 95 % Clopper-Pearson interval; "
                       "what matters is confident identification of a few members (Carlini et al. 2022), not the "
                       "AUC, which averages over all thresholds. A measurement of these attacks on these runs: it "
                       "bounds nothing another attack could do"),
    ("view", "what an adversary observes: server (each decoded message), aggregate (the noisy sum of a round whose "
             "noise the server adds, all a server learns under secure aggregation; its informed adversary also "
             "knows the other clients' updates), public (the released models)"),
    ("probe", "the claim's worst case at a checkpoint model: clients holding one real example each, their update "
              "rescaled to the mechanism's clip and sent through it; the server inverts it (analytic attack)"),
    ("inversion", "gradient inversion of the view the claim covers (the server's; for noise the server adds, the "
                  "aggregate minus the other clients' updates, with the messages in clear beside it) of real FL "
                  "clients at a checkpoint round, beside the same "
                  "attack on their true updates (clean); scored against the images each client trained on, with "
                  "one assignment for clean and defended"),
    ("SSIM, MSE, PSNR", "structural similarity (scikit-image, data range 1; 1 = identical, about 0 = unrelated), "
                        "mean squared error of pixels in [0, 1], and peak signal-to-noise ratio 10 log10(1 / MSE) "
                        "in dB; clean → defended: the attack on the true update, then on what the server sees"),
    ("uplink SNR", "Var(u) / Var(u - û) in dB, u the update as the mechanism receives it (after its clipping) and "
                   "û what the server decodes; the mean over clients and rounds (JoPEQ's Sec. V definition, "
                   "measured on the clipped update)"),
    ("PPN", "privacy-preserving noise: JoPEQ's name for the noise added before its quantizer"),
    ("bits/coord, compression", "the measured size of the real messages per update coordinate; compression: "
                                "32 (float32) over it"),
)
