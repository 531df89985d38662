"""Phrasing of the noise sessions (MedMemoryBench §4 "Noise Augmentation": general health
knowledge consultations on preset topic categories — symptom checks, common medical knowledge,
preventive care, lifestyle advice — and proxy consultations about relatives).

:data:`GH_TOPICS` is the fixed list of general-health topics (the seed uses 38 categories; so
does this list). Each topic is a (slug, question, answer, follow-up, follow-up answer, warning)
tuple. No text here carries a digit, a date or a statement about the patient's own record, so
a general-health session adds words to the memory but never a patient fact. The proxy frames
tell a relative's lab values and medications with the item phrasing of
:mod:`clinlib.dialogue.templates` and name the relative in every fact-bearing sentence.
"""

from __future__ import annotations

# slug, patient question, clinician answer, follow-up question, follow-up answer, warning signs
GH_TOPICS: tuple[tuple[str, str, str, str, str, str], ...] = (
    (
        "common_cold",
        "Do I need an injection when I catch a cold?",
        "A cold is caused by a virus, so antibiotics or injections do not help; rest and fluids do.",
        "How long does a cold usually last?",
        "Most colds settle within a week to ten days.",
        "See a doctor if a fever stays high or breathing becomes difficult.",
    ),
    (
        "flu_prevention",
        "How can I avoid catching the flu this season?",
        "The yearly flu vaccine is the best protection, together with regular hand washing.",
        "Is it too late to get the vaccine in winter?",
        "It is still worth having it during the season.",
        "Come in quickly if you get a high fever with chest pain or confusion.",
    ),
    (
        "flu_vaccine_side_effects",
        "Are there side effects from the flu shot?",
        "A sore arm and feeling tired for a day are common and pass quickly.",
        "Can the shot give me the flu?",
        "No, the injected vaccine cannot cause the flu itself.",
        "Swelling of the face or trouble breathing after a vaccine needs urgent care.",
    ),
    (
        "sore_throat",
        "What should I do about a sore throat?",
        "Warm drinks, throat lozenges and rest help most sore throats, which are usually viral.",
        "When would I need antibiotics?",
        "Only when a test shows a bacterial infection such as strep throat.",
        "Difficulty swallowing saliva or opening the mouth needs to be seen the same day.",
    ),
    (
        "headache",
        "I get tension headaches now and then; what helps?",
        "Regular meals, enough water, sleep and short breaks from screens prevent many of them.",
        "Is it fine to take a painkiller each time?",
        "Occasionally yes, but using painkillers on most days can itself cause headaches.",
        "A sudden severe headache or one with weakness or confusion is an emergency.",
    ),
    (
        "fever_at_home",
        "How should I manage a mild fever at home?",
        "Drink plenty, rest, wear light clothing and use a fever reducer if you are uncomfortable.",
        "Should I try to sweat it out under blankets?",
        "No, heavy blankets can push the temperature up further.",
        "A fever with a stiff neck, a rash or drowsiness needs urgent attention.",
    ),
    (
        "seasonal_allergies",
        "What can I do about hay fever?",
        "Antihistamines and nasal sprays work well, and keeping windows closed on pollen days helps.",
        "Do the tablets make people sleepy?",
        "Newer antihistamines rarely do; older ones often cause drowsiness.",
        "Wheezing or tightness in the chest with allergies should be checked.",
    ),
    (
        "hand_hygiene",
        "How important is hand washing really?",
        "It is one of the most effective ways to stop infections from spreading.",
        "Is hand gel as good as soap and water?",
        "Gel works for most germs, but soap and water are better when hands look dirty.",
        "Cracked, bleeding skin from frequent washing should be treated with a moisturiser.",
    ),
    (
        "sleep_hygiene",
        "I have trouble falling asleep; any tips?",
        "Keep a regular bedtime, avoid screens and caffeine late in the day, and keep the room dark.",
        "Should I nap during the day?",
        "A short nap early in the afternoon is fine; long naps hurt.",
        "Loud snoring with pauses in breathing should be assessed for sleep apnoea.",
    ),
    (
        "exercise_start",
        "How should I start exercising again?",
        "Begin with brisk walks and build up gradually over several weeks.",
        "Is stretching before exercise necessary?",
        "A gentle warm-up matters more than long stretches.",
        "Chest pain or fainting during exercise means stopping and getting checked.",
    ),
    (
        "healthy_diet",
        "What does a balanced diet look like?",
        "Plenty of vegetables, fruit, whole grains and lean protein, with little processed food.",
        "Are all fats bad for me?",
        "No, olive oil, nuts and oily fish provide healthy fats.",
        "Unplanned weight loss is worth discussing with a doctor.",
    ),
    (
        "salt_intake",
        "Should I cut down on salt?",
        "Most people eat more salt than they need, and less salt is good for blood pressure.",
        "Where does most of the salt come from?",
        "Bread, ready meals and processed meats rather than the salt shaker.",
        "Severe swelling of the legs deserves a check-up.",
    ),
    (
        "hydration",
        "How much water should I drink in a day?",
        "Enough that your urine stays pale; needs rise in hot weather and with exercise.",
        "Do tea and coffee count?",
        "Yes, they count towards your daily fluids.",
        "Very dark urine with dizziness can be a sign of dehydration.",
    ),
    (
        "alcohol_advice",
        "Is a glass of wine in the evening harmful?",
        "Keeping alcohol low and having several alcohol-free days each week is the safest habit.",
        "Does alcohol help with sleep?",
        "It may make you drowsy but it lowers the quality of sleep.",
        "Needing a drink to get through the day is something we can help with.",
    ),
    (
        "smoking_cessation",
        "What is the best way to quit smoking?",
        "Combining nicotine replacement with a support programme gives the best chance.",
        "Are electronic cigarettes safer?",
        "They are less harmful than smoking but not risk free.",
        "A cough that does not go away in a smoker should be examined.",
    ),
    (
        "sun_protection",
        "How do I protect my skin from the sun?",
        "Use a broad-spectrum sunscreen, reapply it often, and seek shade around midday.",
        "Do I need sunscreen on cloudy days?",
        "Yes, much of the ultraviolet light passes through clouds.",
        "A mole that changes shape or colour should be looked at.",
    ),
    (
        "back_care",
        "How can I avoid straining my back when lifting?",
        "Bend your knees, keep the load close to your body and avoid twisting.",
        "Is bed rest good for a sore back?",
        "Staying gently active usually helps the back recover faster.",
        "Back pain with numbness in the legs or bladder problems is an emergency.",
    ),
    (
        "posture_desk_work",
        "My neck aches after long days at the desk; what can I change?",
        "Raise the screen to eye level, support your lower back and take regular breaks.",
        "Would a standing desk help?",
        "Alternating between sitting and standing helps many people.",
        "Tingling or weakness in the arms should be assessed.",
    ),
    (
        "eye_strain",
        "My eyes feel tired from the computer; is that harmful?",
        "Screen strain is uncomfortable but not damaging; look into the distance every so often.",
        "Do blue light glasses help?",
        "The evidence for them is weak; regular breaks work better.",
        "Sudden loss of vision or flashing lights needs urgent care.",
    ),
    (
        "dental_hygiene",
        "How often should I see the dentist?",
        "Regular check-ups and brushing twice daily with fluoride toothpaste keep teeth healthy.",
        "Is flossing really necessary?",
        "Cleaning between the teeth prevents gum disease where the brush cannot reach.",
        "Swelling of the jaw with fever needs prompt treatment.",
    ),
    (
        "travel_health",
        "What should I think about before travelling abroad?",
        "Check which vaccinations are advised for the destination and pack a small first-aid kit.",
        "How do I avoid stomach upsets while travelling?",
        "Drink bottled water and eat food that is freshly cooked and hot.",
        "Fever after returning from the tropics should always be checked.",
    ),
    (
        "motion_sickness",
        "How do I cope with motion sickness?",
        "Sit facing forward, look at the horizon and avoid reading while moving.",
        "Do ginger sweets work?",
        "Some people find ginger helps a little.",
        "Vomiting that does not stop needs medical advice.",
    ),
    (
        "stress_management",
        "Work has been stressful; how can I cope better?",
        "Regular exercise, enough sleep and setting aside time to unwind all reduce stress.",
        "Does breathing exercise really help?",
        "Slow breathing calms the body's stress response for many people.",
        "Feeling hopeless or unable to cope is a reason to talk to someone soon.",
    ),
    (
        "weight_management",
        "What is a healthy way to lose weight?",
        "Small lasting changes to diet and activity work better than strict short diets.",
        "Should I skip breakfast?",
        "Skipping meals often leads to overeating later.",
        "Rapid weight loss without trying should be investigated.",
    ),
    (
        "vitamin_supplements",
        "Should I be taking vitamin supplements?",
        "Most people get what they need from a varied diet; a few groups need specific supplements.",
        "What about vitamin D in winter?",
        "Many people benefit from vitamin D in the darker months.",
        "Very high doses of some vitamins can be harmful.",
    ),
    (
        "over_the_counter_pain",
        "Which over-the-counter painkiller is safest?",
        "Paracetamol suits most people; anti-inflammatories can upset the stomach.",
        "Can I combine the two kinds?",
        "Often yes, but check the leaflet and the daily maximum of each.",
        "Black stools after anti-inflammatory tablets need urgent review.",
    ),
    (
        "antibiotic_use",
        "Why didn't I get antibiotics for my cough last winter?",
        "Most coughs are viral, and antibiotics only work against bacteria.",
        "Is it harmful to take them when not needed?",
        "Yes, it causes side effects and makes bacteria resistant.",
        "A cough with high fever and breathlessness may need treatment.",
    ),
    (
        "missed_dose",
        "What should I do if I forget a dose of a medicine?",
        "For most medicines take it when you remember, unless the next dose is nearly due.",
        "Should I double the next dose?",
        "No, doubling up is rarely advised.",
        "Ask the pharmacist when unsure about a specific medicine.",
    ),
    (
        "medicine_storage",
        "How should I store my medicines at home?",
        "Keep them in a cool, dry place out of the reach of children, not in the bathroom.",
        "What do I do with old medicines?",
        "Return them to a pharmacy rather than throwing them away.",
        "Medicines that changed colour or smell should not be used.",
    ),
    (
        "grapefruit_interactions",
        "I heard grapefruit can interfere with medicines; is that true?",
        "Yes, grapefruit changes how some medicines are broken down in the body.",
        "How do I know if mine are affected?",
        "The leaflet says so, or the pharmacist can check for you.",
        "Unusual muscle pain or dizziness after a diet change is worth reporting.",
    ),
    (
        "heartburn",
        "I get heartburn after big meals; what helps?",
        "Smaller meals, not eating late and raising the head of the bed all help.",
        "Are antacids safe to use often?",
        "Occasional use is fine; frequent need should be discussed.",
        "Trouble swallowing or vomiting blood needs urgent care.",
    ),
    (
        "constipation",
        "What can I do about constipation?",
        "More fibre, more fluids and regular activity usually get things moving.",
        "Are laxatives bad for me?",
        "Short courses are safe for most people.",
        "Blood in the stool or a lasting change in habit should be checked.",
    ),
    (
        "food_poisoning",
        "How do I look after myself with food poisoning?",
        "Sip fluids often, rest and eat bland food as the appetite returns.",
        "When can I go back to work?",
        "Once you have been free of vomiting and diarrhoea for two days.",
        "Signs of dehydration or blood in the stool need medical care.",
    ),
    (
        "insect_bites",
        "How should I treat an insect bite?",
        "Clean it, apply something cool and avoid scratching.",
        "Do I need a cream?",
        "A mild steroid cream or an antihistamine can ease the itch.",
        "Spreading redness or swelling of the lips needs prompt attention.",
    ),
    (
        "minor_burns",
        "What is the right first aid for a small burn?",
        "Cool it under running water for a good while and cover it loosely.",
        "Should I put butter on it?",
        "No, butter and ointments trap heat in the skin.",
        "Large or deep burns and burns on the face need a doctor.",
    ),
    (
        "cancer_screening",
        "Which cancer screening tests are worth having?",
        "Screening for bowel, breast and cervical cancer is offered at set ages.",
        "Does screening hurt?",
        "Most tests are quick and cause only brief discomfort.",
        "Do not wait for a screening invitation if you notice a new lump.",
    ),
    (
        "blood_pressure_home",
        "Is it worth checking blood pressure at home?",
        "Home readings give a truer picture than a single clinic reading.",
        "When is the best time to measure?",
        "Sit quietly for a few minutes first and measure at the same time each day.",
        "A severe headache with very high readings needs urgent care.",
    ),
    (
        "hearing_care",
        "How can I protect my hearing?",
        "Keep music at moderate volume and wear ear protection around loud machines.",
        "Should I clean my ears with cotton buds?",
        "No, buds push wax deeper; the ears clean themselves.",
        "Sudden hearing loss in one ear needs to be seen quickly.",
    ),
)

RELATIONS: tuple[str, ...] = (
    "father",
    "mother",
    "husband",
    "wife",
    "son",
    "daughter",
    "brother",
    "sister",
    "grandfather",
    "grandmother",
)
# Relatives are drawn from these slots without replacement, so a patient has one spouse at most.
RELATION_SLOTS: tuple[tuple[str, ...], ...] = (
    ("father",),
    ("mother",),
    ("husband", "wife"),
    ("son",),
    ("daughter",),
    ("brother",),
    ("sister",),
    ("grandfather",),
    ("grandmother",),
)
PRONOUN = {
    "father": "he",
    "husband": "he",
    "son": "he",
    "brother": "he",
    "grandfather": "he",
    "mother": "she",
    "wife": "she",
    "daughter": "she",
    "sister": "she",
    "grandmother": "she",
}
POSSESSIVE = {"he": "his", "she": "her"}

GH_OPENERS = (
    "Hello, doctor.",
    "Hi.",
    "Good morning.",
    "I have a general question today.",
    "Hello, I just wanted some advice.",
)
GH_WHEN = (
    "When should I worry?",
    "Is there anything I should watch out for?",
    "What signs should make me come in?",
)
CLOSINGS = ("Thank you, that helps.", "Okay, that's good to know.", "Thanks for the advice.")
CLOSING_REPLIES = ("You're welcome; come back any time.", "Glad to help.", "No problem at all.")

PROXY_ASKS = (
    "I wanted to ask about my {relation}; {pronoun} just got some test results back.",
    "It's not about me today, it's my {relation}, and I'm a bit worried about {possessive} results.",
    "Could you help me understand my {relation}'s blood tests?",
)
PROXY_HISTORY = (
    "My {relation} has been treated for {condition}.",
    "My {relation} has a history of {condition}.",
)
PROXY_INTROS = (
    "Of course, let's look at your {relation}'s results.",
    "Let me go through what your {relation}'s report says.",
)
# (sentence frame, item format): the item formats are those of templates.LAB_FRAMES.
PROXY_LAB_FRAMES = (
    ("On {date}, your {relation}'s {items}.", "{label} was {value} {unit}"),
    ("Your {relation}'s blood work from {date} showed {items}.", "{label} at {value} {unit}"),
    (
        "The results your {relation} got on {date} came back with {items}.",
        "{label} of {value} {unit}",
    ),
)
PROXY_MED_ASKS = ("And what about {possessive} medicines?", "Is {pronoun} on any treatment for it?")
# Medication items follow templates.MED_ITEMS; the frame names the relative.
PROXY_MED_FRAMES = (
    "Your {relation}'s doctor started {items} on {date}.",
    "According to the letter, your {relation} began {items} on {date}.",
)
PROXY_NO_MEDS = ("Your {relation}'s letter doesn't mention any new medicines.",)
PROXY_WORRY = ("Should {pronoun} be worried?", "Is that serious for {possessive} age?")
PROXY_ADVICE = (
    "Your {relation} should go over these results with {possessive} own doctor.",
    "{possessive_cap} own doctor is the best person to explain what comes next.",
)
