"""A differentially private naive Bayes classifier on UCI Adult (needs dpkit[learn]).

    python examples/private_model.py
"""

import dpkit as dp
from dpkit.core.compose import PrivacyFilter
from dpkit.learn import GaussianNB

train, test = dp.datasets.load_adult("train"), dp.datasets.load_adult("test")
cols = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
X, y = train.select(cols).to_numpy().astype(float), train["income"].to_numpy()
X_test, y_test = test.select(cols).to_numpy().astype(float), test["income"].to_numpy()
bounds = ([17, 1, 0, 0, 1], [90, 16, 99999, 4356, 99])   # Adult's documented ranges
budget = PrivacyFilter(dp.PureDP(1))
for eps in (0.1, 0.5):
    model = GaussianNB(epsilon=eps, bounds=bounds, classes=["<=50K", ">50K"],
                       accountant=budget).fit(X, y)
    print(f"ε = {eps}: test accuracy {(model.predict(X_test) == y_test).mean():.3f}")
print("spent", budget.spent)
